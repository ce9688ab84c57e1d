"""The network: its config, Keras layers, the encoder, task heads and task models, and the
checkpoint formats (the original's TF1 names, ours, Hugging Face directories)."""
