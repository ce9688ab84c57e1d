"""The encoder alone: its export, sentence embeddings and extract_features."""
