"""The evaluation's files, each written atomically: results.tsv (one row per model, step, task
and seed; the random baseline's step is -1), results.md (per model and step, each task's mean
dev score over the seeds, its spread, and the suite's average) and downstream.png (the average
and each task against pretraining step and wall time; needs matplotlib, the `plot` extra)."""
import csv
import io
import os
import statistics

from bert_tf import io_utils

TABLE_FILE, MARKDOWN_FILE, FIGURE_FILE = "results.tsv", "results.md", "downstream.png"
COLUMNS = ("model", "step", "task", "seed", "score", "metric", "seconds", "vocabulary")


def write_tables(output_dir, rows, task_names, mixed_vocabularies=False):
    """results.tsv and results.md of `rows` (rewritten after each run, so that a killed
    evaluation leaves the table of what it finished); returns the summary (`summarise`)."""
    with io_utils.atomic_open(os.path.join(output_dir, TABLE_FILE)) as f:
        writer = csv.writer(f, delimiter="\t", lineterminator="\n")
        writer.writerow(COLUMNS)
        for row in rows:
            writer.writerow(["" if row[c] is None else row[c] for c in COLUMNS])
    summary = summarise(rows, task_names)
    with io_utils.atomic_open(os.path.join(output_dir, MARKDOWN_FILE)) as f:
        f.write(markdown(summary, task_names, rows, mixed_vocabularies))
    return summary


def write(output_dir, rows, task_names, mixed_vocabularies=False, log=print):
    """The tables and the figure."""
    summary = write_tables(output_dir, rows, task_names, mixed_vocabularies)
    if not plot(os.path.join(output_dir, FIGURE_FILE), summary, task_names):
        log(f"[evaluate_pretraining] note: no {FIGURE_FILE}: matplotlib is not installed "
            f"(pip install bert_tf[plot])")


def summarise(rows, task_names):
    """{(model, step): {"seconds", "vocabulary", task: [scores over seeds], "average": mean of
    the task means (None unless every task has a score)}}, in the rows' order."""
    summary = {}
    for row in rows:
        entry = summary.setdefault((row["model"], row["step"]), {
            "seconds": row["seconds"], "vocabulary": row["vocabulary"]})
        if row["score"] is not None:
            entry.setdefault(row["task"], []).append(row["score"])
    for entry in summary.values():
        means = [statistics.mean(entry[name]) for name in task_names if entry.get(name)]
        entry["average"] = statistics.mean(means) if len(means) == len(task_names) else None
    return summary


def _cell(scores):
    if not scores:
        return "-"
    if len(scores) == 1:
        return f"{scores[0]:.1f}"
    return f"{statistics.mean(scores):.1f} ± {statistics.stdev(scores):.1f}"


def markdown(summary, task_names, rows, mixed_vocabularies):
    metrics = {row["task"]: row["metric"] for row in rows}
    seeds = sorted({row["seed"] for row in rows})
    out = io.StringIO()
    out.write("Dev scores (0-100) after fine-tuning; " + ", ".join(
        f"{name}: {metrics.get(name, '?')}" for name in task_names)
        + f". Seeds {', '.join(map(str, seeds))}"
        + (" (mean ± standard deviation)" if len(seeds) > 1 else "")
        + "; step -1: the same config randomly initialised.\n\n")
    head = ["model", "step", "seconds"] + (["vocabulary"] if mixed_vocabularies else [])
    out.write("| " + " | ".join(head + list(task_names) + ["average"]) + " |\n")
    out.write("|" + "---|" * (len(head) + len(task_names) + 1) + "\n")
    for (model, step), entry in summary.items():
        cells = [model, str(step), "-" if entry["seconds"] is None else f"{entry['seconds']:.0f}"]
        if mixed_vocabularies:
            cells.append(entry["vocabulary"])
        cells += [_cell(entry.get(name)) for name in task_names]
        cells.append("-" if entry["average"] is None else f"{entry['average']:.1f}")
        out.write("| " + " | ".join(cells) + " |\n")
    return out.getvalue()


def plot(path, summary, task_names):
    """downstream.png: per model, the average (and each task, thin) against step and against
    seconds, its random baseline dashed; False when matplotlib is not installed."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    figure, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for index, model in enumerate(dict.fromkeys(model for model, _ in summary)):
        color = f"C{index % 10}"
        points = sorted((step, entry) for (name, step), entry in summary.items()
                        if name == model and step >= 0)
        baseline = summary.get((model, -1))
        for axis, x_of in ((axes[0], lambda step, entry: step),
                           (axes[1], lambda step, entry: entry["seconds"])):
            usable = [(x_of(step, entry), entry) for step, entry in points
                      if x_of(step, entry) is not None]
            for name in ["average"] + list(task_names):
                xy = [(x, entry[name] if name == "average" else statistics.mean(entry[name]))
                      for x, entry in usable if entry.get(name)]
                if xy:
                    # Tasks marked too: a model with one checkpoint is a point, not a line.
                    style = (dict(marker="o", markersize=6, linewidth=2, alpha=1, label=model)
                             if name == "average" else
                             dict(marker=".", markersize=3, linewidth=0.7, alpha=0.5))
                    axis.plot(*zip(*xy), color=color, **style,
                              clip_on=False)  # a model at step 0 sits on the axis
            if baseline and baseline["average"] is not None:
                axis.axhline(baseline["average"], color=color, linestyle="--", linewidth=1,
                             label=f"random init of {model}'s config")
    axes[0].set_xlabel("pretraining step")
    axes[1].set_xlabel("pretraining wall time (s)")
    for axis in axes:
        # From 0, with room past the last point (matplotlib's margin is of the data's own span).
        axis.set_xlim(left=0, right=axis.dataLim.x1 * 1.04 if axis.dataLim.x1 > 0 else None)
        axis.set_ylabel("downstream dev score (average: thick; tasks: thin)")
        axis.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    figure.tight_layout()
    with io_utils.atomic_open(path, "wb") as f:
        figure.savefig(f, format="png", dpi=110)
    plt.close(figure)
    return True
