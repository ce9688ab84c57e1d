"""Benchmarks that run bert_tf beside its peers; run each from the project root as
`python -m bench.<group>.<name>` (bench/README.md)."""
