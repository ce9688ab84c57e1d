"""Tasks on the runner: the contract (`base`), the one `prepare` of their records
(`preprocessor`), the names (`registry`), shared metrics, and a package per task
(`classification`, `ner`, `squad`, `multiple_choice`, `encoder`, `pretraining`), each its task
beside its preprocessor and its readers of raw files.
"""
