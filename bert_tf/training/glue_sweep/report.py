"""The sweep's choice of a run per task and its report: results.md and results.tsv, a row per
grid point of each task's dev score, the chosen runs' row with the paper's Table 1 average and
the GLUE score, and where the sweep's time went."""
import os

from bert_tf import io_utils
from bert_tf.progress import format_duration
from bert_tf.training.glue_sweep.grid import GridPoint

METRIC_NAMES = {"eval_accuracy": "acc", "eval_f1": "F1", "eval_matthews_corrcoef": "MCC",
                "eval_pearson": "Pearson", "eval_spearman": "Spearman"}


def task_score(results, task):
    """The task's GLUE score: the mean of its GLUE metrics (None if one is not a number)."""
    values = [results.get(key) for key in task.glue_metrics]
    return None if any(v is None for v in values) else sum(values) / len(values)


def choose(runs, task):
    """The run with the best dev score by the task's metric (the first in grid order of
    equal ones; runs whose score is not a number come last), or None."""
    best = None
    for run in runs:
        score = run["results"].get(task.metric)
        if score is not None and (best is None or score > best["results"][task.metric]):
            best = run
    return best or (runs[0] if runs else None)


def split_time(summary, wall):
    """How the sweep's time splits: preparing the records, training and evaluating each run
    (as recorded when they were done, by this sweep or an earlier one), predicting the test
    sets (this sweep), and this sweep's wall time."""
    preparation = sum(s["prepare_seconds"] for s in summary.values())
    training = sum(r["train_seconds"] for s in summary.values() for r in s["runs"])
    evaluation = sum(r["eval_seconds"] for s in summary.values() for r in s["runs"])
    prediction = sum(s["predict_seconds"] for s in summary.values())
    return {"preparation": preparation, "training": training, "evaluation": evaluation,
            "test prediction": prediction, "this sweep's wall time": wall}


# ---- The table.
def _percent(value):
    return "" if value is None else f"{100 * value:.1f}"


def averages(summary):
    """(the paper's Table 1 average, the GLUE score) of the chosen runs' dev scores, each over
    the tasks there are (None: no task)."""
    paper = [e["chosen"]["results"].get(e["task"].metric) for e in summary.values()
             if e["task"].in_paper_average]
    glue_scores = [task_score(e["chosen"]["results"], e["task"]) for e in summary.values()]
    mean = lambda values: (None if not values or None in values
                           else sum(values) / len(values))
    return mean(paper), mean(glue_scores)


AVERAGES_NOTE = (
    "Average: the paper's Table 1 average (WNLI left out; each task's metric: MCC for CoLA, "
    "Spearman for STS-B, F1 for MRPC and QQP, accuracy for the others; MNLI matched). GLUE "
    "score: the GLUE benchmark's, the mean over every task (WNLI included) of each task's "
    "score, which for MRPC and QQP is the mean of F1 and accuracy and for STS-B of Pearson and "
    "Spearman (the benchmark also averages MNLI matched and mismatched; here dev matched). "
    "Both over the tasks of this sweep, on dev, x100.")


def table_rows(summary, grid):
    """The table: a header, a row per grid point (each task's dev score by its metric), the
    chosen runs' row with the averages, and the chosen settings."""
    entries = list(summary.values())
    header = ["setting"] + [f"{e['task'].column} ({METRIC_NAMES[e['task'].metric]})"
                            for e in entries] + ["Average (paper)", "GLUE score"]
    rows = []
    for point in grid:
        cells = [point.setting]
        for e in entries:
            run = next((r for r in e["runs"] if r["name"] == point.name), None)
            cells.append(_percent(run and run["results"].get(e["task"].metric)))
        rows.append(cells + ["", ""])
    paper, glue_score = averages(summary)
    rows.append(["chosen on dev"] + [_percent(e["chosen"]["results"].get(e["task"].metric))
                                     for e in entries] + [_percent(paper), _percent(glue_score)])
    rows.append(["chosen setting"] + [GridPoint(**e["chosen"]["point"]).setting
                                      for e in entries] + ["", ""])
    return header, rows


def write_tables(output_dir, summary, grid, timing):
    header, rows = table_rows(summary, grid)
    with io_utils.atomic_open(os.path.join(output_dir, "results.tsv")) as f:
        for cells in [header] + rows:
            f.write("\t".join(cells) + "\n")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    lines += ["", AVERAGES_NOTE, "",
              "Wall time: " + ", ".join(f"{key} {format_duration(value)}"
                                        for key, value in timing.items())
              + " (each task's records prepared once and shared by its runs)."]
    with io_utils.atomic_open(os.path.join(output_dir, "results.md")) as f:
        f.write("\n".join(lines) + "\n")
