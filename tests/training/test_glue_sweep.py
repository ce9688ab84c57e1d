"""run.run_glue: the paper's GLUE grid on slices of real GLUE data with a tiny model.

One sweep (2 learning rates, 1 epoch) over STS-B and RTE slices is killed (SIGKILL) as soon as
its first run is recorded, then run again to the end; the tests read what it left:
- the chosen run per task is the one whose eval_results.txt (the runner's, per run) has the
  best dev score by the task's metric, and the submission is that run's predictions;
- the submission files hold every row of each real test file, in order, keyed by its index
  column, with the leaderboard's header and label strings (read from the test files with the
  csv module, not by our reader);
- the second sweep redid no finished run and prepared no task's records again;
- bad input: one `error:` line, exit 2, nothing written.
"""
import csv
import json
import shutil
import signal
import subprocess
import sys
import time

import pytest
from conftest import (
    PROJECT_ROOT,
    SHARED_DATA,
    UNCASED_VOCAB,
    assert_refused,
    command_env,
    read_eval_numbers,
    require_path,
)
from test_bad_input import TINY

GLUE = SHARED_DATA / "glue_data"
TASKS = {"STS-B": "eval_spearman", "RTE": "eval_accuracy"}
GRID = ["--learning_rates=1e-3,1e-4", "--epochs=1", "--batch_sizes=8"]
# Each run evaluates at steps 2, 4 and 5 and keeps its best checkpoint by the sweep's metric.
BEST = ["--eval_during_training", "--keep_best_checkpoint", "--save_checkpoints_steps=2"]
SLICE = {"train": 40, "dev": 20, "test": 20}


def copy_slice(source, target):
    """The header and the first rows of each GLUE file of `source` (SLICE)."""
    target.mkdir(parents=True)
    for split, rows in SLICE.items():
        lines = (source / f"{split}.tsv").read_text(encoding="utf-8").splitlines(True)
        (target / f"{split}.tsv").write_text("".join(lines[:rows + 1]), encoding="utf-8")


def sweep_line(data_dir, output_dir, files, *extra):
    return [sys.executable, "-m", "run.run_glue", f"--data_dir={data_dir}",
            f"--output_dir={output_dir}", f"--vocab_file={files['vocab']}",
            f"--bert_config_file={files['config']}", f"--init_checkpoint={files['checkpoint']}",
            "--max_seq_length=32", "--seed=3", *GRID, *BEST, *extra]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    require_path(GLUE)
    root = tmp_path_factory.mktemp("glue")
    for task in TASKS:
        copy_slice(GLUE / task, root / "data" / task)
    from bert_tf.model.checkpoints import write_tf1_checkpoint
    from bert_tf.model.config import BertConfig
    from bert_tf.model.encoder import BertEncoder
    config = dict(TINY, vocab_size=30522)
    (root / "bert_config.json").write_text(json.dumps(config))
    checkpoint = write_tf1_checkpoint(BertEncoder(BertConfig.from_dict(config)),
                                      root / "encoder" / "model.ckpt")
    return {"root": root, "data": root / "data", "vocab": require_path(UNCASED_VOCAB),
            "config": root / "bert_config.json", "checkpoint": checkpoint}


def run_results(output_dir):
    return sorted((output_dir / "STS-B").glob("runs/*/run_result.json")) + sorted(
        (output_dir / "RTE").glob("runs/*/run_result.json"))


@pytest.fixture(scope="module")
def sweep(files):
    """The sweep killed after its first recorded run, then run again: (output_dir, the first
    sweep's recorded runs {path: (bytes, mtime)}, the records' markers' mtimes, the second
    sweep's output)."""
    output_dir = files["root"] / "out"
    line = sweep_line(files["data"], output_dir, files)
    process = subprocess.Popen(line, cwd=PROJECT_ROOT, env=command_env(),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while not run_results(output_dir) and process.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    finished = {path: (path.read_bytes(), path.stat().st_mtime_ns)
                for path in run_results(output_dir)}
    markers = {path: path.stat().st_mtime_ns
               for path in output_dir.glob("*/records/prepared.json")}
    second = subprocess.run(line, check=False, cwd=PROJECT_ROOT, env=command_env(),
                            capture_output=True,
                            text=True, timeout=300)
    assert second.returncode == 0, second.stderr[-3000:]
    return output_dir, finished, markers, second.stderr


def test_the_chosen_run_is_the_best_on_dev(sweep):
    """Per task, the chosen run (whose predictions are the submission, whose score
    the table's "chosen on dev" row gives) has the best dev score of the runs' own
    eval_results.txt (the first in grid order among equal ones)."""
    output_dir, _, _, _ = sweep
    table = list(csv.reader((output_dir / "results.tsv").read_text().splitlines(),
                            delimiter="\t"))
    header, chosen_row = table[0], next(row for row in table if row[0] == "chosen on dev")
    for task, metric in TASKS.items():
        runs = [output_dir / task / "runs" / name
                for name in ("lr0.001_bs8_ep1_r0", "lr0.0001_bs8_ep1_r0")]
        scores = [read_eval_numbers(run / "eval_results.txt")[metric] for run in runs]
        best = runs[scores.index(max(scores))]
        # Each run's score is its kept checkpoint's, the best of its evaluations by the
        # sweep's metric (STS-B: Spearman's, not run_classifier's default Pearson's).
        for run in runs:
            record = json.loads((run / "best" / "best_checkpoint.json").read_text())
            evaluations = record["selection"]["evaluations"]
            assert record["selection"]["metric"] == metric
            assert [step for step, _ in evaluations] == [2, 4, 5]
            best_step, best_value = max(evaluations, key=lambda e: (e[1], -e[0]))
            results = read_eval_numbers(run / "eval_results.txt")
            assert results["best_step"] == results["global_step"] == best_step
            assert results[metric] == pytest.approx(best_value, abs=1e-6)
        assert ((output_dir / "submission" / f"{task}.tsv").read_bytes()
                == (best / "submission" / f"{task}.tsv").read_bytes())
        column = next(i for i, name in enumerate(header) if name.startswith(task + " "))
        assert float(chosen_row[column]) == pytest.approx(100 * max(scores), abs=0.051)
    assert "GLUE score" in header and (output_dir / "results.md").exists()


def test_submission_has_every_test_row_in_order(sweep, files):
    """Each submission file is `index<TAB>prediction`, then one row per row of the
    task's test file, in its order, keyed by its index column, with a label of the task (RTE:
    entailment / not_entailment; STS-B: a number); the zip holds the same files."""
    import zipfile
    output_dir, _, _, _ = sweep
    valid = {"RTE": lambda value: value in ("entailment", "not_entailment"),
             "STS-B": lambda value: float(value) == float(value)}
    archive = zipfile.ZipFile(output_dir / "submission.zip")
    assert sorted(archive.namelist()) == ["RTE.tsv", "STS-B.tsv"]
    for task in TASKS:
        with open(files["data"] / task / "test.tsv", newline="", encoding="utf-8") as f:
            test_rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
        indices = [row[test_rows[0].index("index")] for row in test_rows[1:]]
        assert len(indices) == SLICE["test"]
        text = (output_dir / "submission" / f"{task}.tsv").read_text()
        assert archive.read(f"{task}.tsv").decode() == text
        lines = text.splitlines()
        assert lines[0] == "index\tprediction"
        rows = [line.split("\t") for line in lines[1:]]
        assert [row[0] for row in rows] == indices
        assert all(len(row) == 2 and valid[task](row[1]) for row in rows), rows


def test_a_killed_sweep_redoes_no_finished_run(sweep):
    """The sweep killed after its first recorded run, run again, kept every run
    recorded (same file, same time), said so, prepared no records again, and finished the
    grid."""
    output_dir, finished, markers, output = sweep
    assert finished and markers
    for path, (data, mtime) in finished.items():
        assert path.read_bytes() == data and path.stat().st_mtime_ns == mtime
        assert f"{path.parent.name}: run " in output
    assert output.count("finished earlier") == len(finished)
    for path, mtime in markers.items():
        assert path.stat().st_mtime_ns == mtime
    assert len(run_results(output_dir)) == 4
    assert "ETA" in output and "run 4/4" in output


def test_bad_input(files, tmp_path):
    """A data_dir without a GLUE task, a grid value out of range, a best_metric a
    task lacks, a test file without its index column: one error line, exit 2, nothing
    written."""
    from bert_tf.errors import InputError
    from bert_tf.training.glue_sweep.grid import make_grid
    from bert_tf.training.glue_sweep.sweep import run_sweep

    empty = tmp_path / "empty"
    empty.mkdir()
    out = tmp_path / "out"
    assert_refused("run.run_glue", sweep_line(empty, out, files)[3:],
                   "holds no GLUE task", tmp_path)
    assert not out.exists()
    assert_refused("run.run_glue", sweep_line(files["data"], out, files)[3:] + ["--restarts=0"],
                   "--restarts=0: must be a positive integer", tmp_path)
    assert not out.exists()
    assert_refused("run.run_glue", sweep_line(files["data"], out, files)[3:]
                   + ["--best_metric=eval_matthews_corrcoef"],
                   "--best_metric: 'eval_matthews_corrcoef' is not in the task's eval results",
                   tmp_path)
    assert not out.exists()
    for grid, expected in (({"learning_rates": ["0"]}, "learning_rates: must be in (0, 1)"),
                           ({"batch_sizes": ["8.5"]}, "batch_sizes: must be positive"),
                           ({"epochs": ["-1"]}, "epochs: must be in"),
                           ({"restarts": 0}, "restarts: must be an integer"),
                           # Two rates one run folder's name would not tell apart.
                           ({"learning_rates": ["2e-5", "2.0000001e-5"]},
                            "learning_rates: gives '2.0000001e-5' twice (as 2e-05 in its runs'")):
        with pytest.raises(InputError, match=expected.replace("(", r"\(").replace(")", r"\)")):
            make_grid(**grid)
    data = tmp_path / "data"
    shutil.copytree(files["data"], data)
    test_file = data / "RTE" / "test.tsv"
    test_file.write_text(test_file.read_text().replace("index\t", "id\t", 1))
    with pytest.raises(InputError, match="test.tsv.*has no 'index' column"):
        run_sweep(str(data), str(out), None, 32, make_grid(), None)
    assert not out.exists()


def test_a_sweep_started_again_on_other_inputs_is_refused(sweep, files, tmp_path):
    """A sweep started again on changed data (or another max_seq_length) does not train on the
    records an earlier sweep prepared, nor with other run settings (another seed or shuffle
    buffer) beside the runs it finished: one error line naming its prepared.json or
    sweep.json, exit 2, nothing changed."""
    output_dir = sweep[0]
    data = tmp_path / "data"
    shutil.copytree(files["data"], data)
    dev = data / "RTE" / "dev.tsv"
    dev.write_text(dev.read_text(encoding="utf-8").replace("entailment", "not_entailment", 1),
                   encoding="utf-8")
    marker = output_dir / "RTE" / "records" / "prepared.json"
    assert_refused("run.run_glue", sweep_line(data, output_dir, files)[3:],
                   f"error: {marker}: an earlier sweep prepared these records from other "
                   f"inputs (data differ)", output_dir)
    marker = output_dir / "STS-B" / "records" / "prepared.json"
    assert_refused("run.run_glue",
                   [flag for flag in sweep_line(files["data"], output_dir, files)[3:]
                    if not flag.startswith("--max_seq_length")] + ["--max_seq_length=24"],
                   f"error: {marker}: an earlier sweep prepared these records from other "
                   f"inputs (max_seq_length differ)", output_dir)
    flags = [flag for flag in sweep_line(files["data"], output_dir, files)[3:]
             if not flag.startswith("--seed")] + ["--seed=4"]
    assert_refused("run.run_glue", flags,
                   f"error: {output_dir / 'sweep.json'}: an earlier sweep in this output_dir ran "
                   f"with other settings (seed differ)", output_dir)
    assert_refused("run.run_glue", sweep_line(files["data"], output_dir, files)[3:]
                   + ["--shuffle_buffer_size=7"],
                   f"error: {output_dir / 'sweep.json'}: an earlier sweep in this output_dir ran "
                   f"with other settings (shuffle_buffer_size differ)", output_dir)


def test_a_sweep_frees_each_runs_model(files, tmp_path, monkeypatch):
    """Every model a sweep's runs build (trained, evaluated, the chosen one predicting) is
    freed when its run ends, and so is every graph its training traced (each holds the
    model's variables and the optimizer's slots): a sweep's memory does not grow by a model
    and its optimizer per run."""
    import gc
    import weakref

    from bert_tf.api import resolve_model_files
    from bert_tf.tasks.classification.task import ClassificationTask
    from bert_tf.training.glue_sweep.grid import make_grid
    from bert_tf.training.glue_sweep.sweep import run_sweep
    from bert_tf.training.settings import RunSettings

    models = []
    build_model = ClassificationTask.build_model

    def recorded_build_model(task):
        model = build_model(task)
        models.append(weakref.ref(model))
        return model

    def train_loop_graphs():  # bert_tf.training.loops' train loop, traced
        return [graph for graph in gc.get_objects()
                if type(graph).__name__ == "FuncGraph" and graph.name == "train_loop"]

    earlier = train_loop_graphs()  # other tests' in this process
    monkeypatch.setattr(ClassificationTask, "build_model", recorded_build_model)
    model_files = resolve_model_files(str(files["checkpoint"]), str(files["config"]),
                                      str(files["vocab"]))
    settings = RunSettings(output_dir=None, do_train=True, do_eval=True, do_predict=True,
                           init_checkpoint=str(files["checkpoint"]), seed=3,
                           vocab_file=model_files.vocab_file)
    run_sweep(str(files["data"]), str(tmp_path / "out"), model_files, 32,
              make_grid(["1e-3", "1e-4"], ["8"], ["1"]), settings, tasks=["RTE"],
              log=lambda message: None)
    gc.collect()
    assert len(models) >= 3  # 2 runs and the chosen run's predict
    assert [ref() for ref in models if ref() is not None] == []
    assert [graph for graph in train_loop_graphs()
            if not any(graph is other for other in earlier)] == []


# ---- The sweep's rules on hand-made runs (no training): the oracle is each rule as the
# module's docstrings and the GLUE leaderboard define it, computed by hand.
def _glue_task(name):
    from bert_tf.training.glue_sweep.tasks import GLUE_TASKS
    return next(task for task in GLUE_TASKS if task.name == name)


def test_choose_takes_the_first_best_run_and_passes_over_scores_that_are_no_number():
    """The chosen run has the highest dev score by the task's metric; among equal ones the
    first in grid order; a run whose score is not a number (NaN, recorded as None) is never
    chosen before one that is, even a negative MCC; with none a number, the first run."""
    from bert_tf.training.glue_sweep.report import choose

    def runs(metric, *scores):
        return [{"name": f"run{i}", "results": {metric: score, "eval_accuracy": 0.5}}
                for i, score in enumerate(scores)]

    mrpc, cola = _glue_task("MRPC"), _glue_task("CoLA")
    assert choose(runs("eval_f1", 0.7, 0.9, 0.9, 0.8), mrpc)["name"] == "run1"
    assert choose(runs("eval_f1", 0.9, 0.9), mrpc)["name"] == "run0"
    # CoLA's Matthews correlation is NaN for constant predictions and may be negative.
    assert choose(runs("eval_matthews_corrcoef", None, -0.2, None), cola)["name"] == "run1"
    assert choose(runs("eval_matthews_corrcoef", -0.3, None, -0.1), cola)["name"] == "run2"
    assert choose(runs("eval_matthews_corrcoef", None, None), cola)["name"] == "run0"
    assert choose([], cola) is None


def test_averages_are_the_papers_and_the_glue_benchmarks():
    """AVERAGES_NOTE's rules by hand: the paper's Table 1 average of each task's metric (MRPC
    F1, STS-B Spearman, CoLA MCC) leaves WNLI out; the GLUE score averages every task's score,
    which is the mean of F1 and accuracy for MRPC and of Pearson and Spearman for STS-B."""
    from bert_tf.training.glue_sweep.report import averages
    chosen = {"MRPC": {"eval_f1": 0.9, "eval_accuracy": 0.8},
              "STS-B": {"eval_pearson": 0.88, "eval_spearman": 0.86},
              "CoLA": {"eval_matthews_corrcoef": 0.5, "eval_accuracy": 0.8},
              "WNLI": {"eval_accuracy": 0.56}}
    summary = {name: {"task": _glue_task(name), "chosen": {"results": results}}
               for name, results in chosen.items()}
    paper, glue_score = averages(summary)
    assert paper == pytest.approx((0.9 + 0.86 + 0.5) / 3)
    assert glue_score == pytest.approx(((0.9 + 0.8) / 2 + (0.88 + 0.86) / 2 + 0.5 + 0.56) / 4)


def test_submission_rows_are_the_predicted_labels_and_scores(tmp_path):
    """SubmissionTask on hand-made predictions (a padding row last): RTE's rows name each
    row's most probable label in the processor's label order (the leaderboard's strings);
    STS-B's rows are the predicted scores as numbers within 0.0005 (three decimals)."""
    import numpy as np

    from bert_tf.tasks.classification import get_processor
    from bert_tf.training.glue_sweep.submission import SubmissionTask
    from bert_tf.tasks.classification.task import ClassificationConfig

    def written(config, values, indices):
        path = tmp_path / "submission.tsv"
        task = SubmissionTask(config, str(path), indices)
        real = np.array([1] * len(indices) + [0], np.float32)
        task.write_predictions({"probabilities": np.array(values, np.float32),
                                "is_real_example": real}, str(tmp_path))
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
        assert rows[0] == ["index", "prediction"]
        assert [row[0] for row in rows[1:]] == indices
        return [row[1] for row in rows[1:]]

    labels = get_processor("rte").get_labels()
    assert labels == ["entailment", "not_entailment"]
    assert written(ClassificationConfig(labels=labels),
                   [[0.9, 0.1], [0.2, 0.8], [0.45, 0.55], [0.7, 0.3], [0.5, 0.5]],
                   ["0", "1", "2", "3"]) == ["entailment", "not_entailment", "not_entailment",
                                             "entailment"]
    scores = [3.14159, 0.2724, 4.99951, 1.5]
    predicted = written(ClassificationConfig(labels=None, task_metric="correlation"),
                        [[s] for s in scores] + [[0.0]], ["10", "11", "12", "13"])
    assert all(abs(float(value) - score) <= 5e-4 for value, score in zip(predicted, scores)), \
        predicted


def test_mnli_test_sets_are_the_leaderboards_files(tmp_path):
    """The leaderboard's MNLI-m.tsv holds the predictions of test_matched.tsv, MNLI-mm.tsv of
    test_mismatched.tsv (and AX.tsv of the diagnostic set): each submission's rows are keyed by
    its own file's index column."""
    from bert_tf.training.glue_sweep.tasks import find_tasks
    header = ("index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
              "sentence1_parse\tsentence2_parse\tsentence1\tsentence2")

    def tsv(path, indices, extra=""):
        path.write_text("\n".join([header + extra] + [
            f"{i}\t1\t1a\tfiction\t( a )\t( b )\t(ROOT a)\t(ROOT b)\tA.\tB.{extra and chr(9) + 'x'}"
            for i in indices]) + "\n", encoding="utf-8")

    mnli = tmp_path / "MNLI"
    mnli.mkdir()
    tsv(mnli / "train.tsv", ["0"], "\tlabel1\tgold_label")
    tsv(mnli / "dev_matched.tsv", ["0"], "\tlabel1\tgold_label")
    tsv(mnli / "test_matched.tsv", ["10", "11", "12"])
    tsv(mnli / "test_mismatched.tsv", ["20", "21", "22", "23"])
    (tmp_path / "diagnostic").mkdir()
    (tmp_path / "diagnostic" / "diagnostic.tsv").write_text(
        "index\tsentence1\tsentence2\n30\tA.\tB.\n31\tC.\tD.\n", encoding="utf-8")
    found, = find_tasks(str(tmp_path), ["MNLI"])
    assert found.indices == {"MNLI-m.tsv": ["10", "11", "12"],
                             "MNLI-mm.tsv": ["20", "21", "22", "23"], "AX.tsv": ["30", "31"]}
