"""The BERT paper's GLUE protocol (section 4.1): per task, a grid of fine-tuning runs (learning
rates x batch sizes x epochs x restarts) on records prepared once, the best run on dev by the
task's metric, its test predictions in the GLUE leaderboard's submission format, and the dev
scores in the layout of the paper's Table 1. run/run_glue.py is its command line,
`sweep.run_sweep` its driver; the numbers and how they are averaged: docs/fine_tuning.md
(run_glue).

Layout of output_dir: <task>/records (the task's records, `prepared.json` once they are
complete), <task>/runs/<grid point> (each run's output_dir; `run_result.json` once it is
finished, written atomically: a sweep started again skips it), sweep.json (the run settings
every run shares: a sweep started again must have the same), submission/ and submission.zip
(one file per task, `index<TAB>prediction`), results.md and results.tsv.

The package by job: `tasks` (the GLUE tasks and their files), `grid` (the grid of runs),
`records` (each task's records and the sweep's settings, prepared once and checked when a
sweep starts again), `submission` (the leaderboard's files), `report` (the choice of a run and
the tables), `sweep` (the driver).
"""
