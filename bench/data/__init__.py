"""Data benches: tokenizers, create_pretraining_data (and its Beam runner), vocabulary extension."""
