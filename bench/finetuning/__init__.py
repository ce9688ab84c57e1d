"""Fine-tuning benches: GLUE throughput and accuracy, SQuAD predict and post-processing, predict
passes."""
