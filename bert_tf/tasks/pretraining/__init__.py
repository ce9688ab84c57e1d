"""Masked-LM / next-sentence pretraining: run_pretraining's task (`task`), masks drawn when
records are read (`dynamic_masking`) and the served masked LM's preprocessor (`masked_text`).
The records are create_pretraining_data's (`bert_tf.data.pretraining`)."""
