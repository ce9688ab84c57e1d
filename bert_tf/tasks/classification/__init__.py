"""Sentence (pair) classification and regression: run_classifier's task and its records."""
