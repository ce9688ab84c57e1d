"""Serving benches: SavedModel, LiteRT and int8 beside ONNX Runtime and transformers, memory of
prediction, sentence embeddings."""
