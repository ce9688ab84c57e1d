"""Masked-LM / next-sentence pretraining: run_pretraining's task and create_pretraining_data's
records. Imports nothing: create_pretraining_data reads its preprocessor without TensorFlow."""
