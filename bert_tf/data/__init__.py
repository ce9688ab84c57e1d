"""Records below the tasks: a record layout defined once (`schema`), TFRecord writing and parsing
(`records`), a task's TSV/CSV files read as the original reads them (`tsv`), and the tf.data
pipelines that read records into batches (`input_pipeline`).
"""
