"""SQuAD 1.1 / 2.0 question answering: run_squad's task, its records, answers and scores."""
