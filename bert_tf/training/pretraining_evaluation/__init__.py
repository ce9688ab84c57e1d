"""Downstream evaluation of pretrained models (`evaluate`): every checkpoint of a pretraining
run, or any model directory, and a randomly initialised copy of each config, fine-tuned on one
suite of tasks with one fixed protocol, each run by the tasks' own preparation and the runner.
docs/run_pretraining.md, "Is my pretraining any good?", has the protocol and the output files.
"""
