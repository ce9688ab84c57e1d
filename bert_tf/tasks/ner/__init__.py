"""Token classification (named entities): run_ner's task and its records."""
