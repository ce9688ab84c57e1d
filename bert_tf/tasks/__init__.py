"""Tasks on the runner: the contract (`base.Task`) and one module per task with the data module
that turns its raw files into records: pretraining, sentence (pair) classification, token
classification (tagging), SQuAD; their metrics."""
