"""Training benches: pretraining step throughput, time to a quality, packing, recompute, the
encoder, profiles and scaling on paper."""
