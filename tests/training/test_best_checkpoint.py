"""The best checkpoint and early stopping (bert_tf.training.best_checkpoint, the runner's
--keep_best_checkpoint, --best_metric, --early_stopping_patience, --early_stopping_threshold).

- `Selection` against hand-computed sequences of dev scores: the best step (ties keep the
  earlier), the evaluations without improvement, the stop; lower-is-better losses, a threshold;
- the record in output_dir/best: written after every evaluation, the best weights named only
  once written, a resumed run going on from it (evaluations after the resumed step dropped);
- end to end on real MRPC rows with a tiny model: run_classifier evaluating at every step
  stops after the patience, eval_results.txt holds the best step's results (best_step,
  best_eval_loss, early_stopping_step) and test_results.tsv is what that checkpoint predicts
  (the Python API from the folder, not the latest checkpoint); a rerun with more epochs
  resumes with the best so far; a run killed between a checkpoint and its evaluation's record
  evaluates that checkpoint when it resumes;
- bad flags: one error line naming the flag, exit 2, nothing left behind.
"""
import json
import math
import os

import pytest

from bert_tf.errors import InputError
from bert_tf.model.checkpoints import BEST_RECORD_FILE as RECORD_FILE
from bert_tf.training.best_checkpoint import (BestCheckpoint, Selection,
                                              greater_is_better)
from bert_tf.training.settings import RunSettings
from conftest import (assert_one_line_error, eval_history, read_eval_results,
                      run_command_line)


# ---- The rule.
def run_selection(values, metric="eval_accuracy", patience=0, threshold=0.0, start=100,
                  every=100):
    """Feeds `values` (evaluations at steps start, start + every, ...) until the selection
    stops; returns (selection, the steps that became the best, the step it stopped at)."""
    selection = Selection(metric, patience, threshold)
    improved, stopped_at = [], None
    for index, value in enumerate(values):
        step = start + index * every
        if selection.update(step, value):
            improved.append(step)
        if selection.stopped:
            stopped_at = step
            break
    return selection, improved, stopped_at


@pytest.mark.parametrize("values, patience, best_step, best_value, improved, stopped_at", [
    # Rising then falling: the peak at step 300; two evaluations without improvement stop.
    ([0.5, 0.6, 0.7, 0.65, 0.68, 0.9], 2, 300, 0.7, [100, 200, 300], 500),
    # A tie is no improvement: the earlier step stays the best, and it counts against patience.
    ([0.5, 0.7, 0.7, 0.7, 0.8], 2, 200, 0.7, [100, 200], 400),
    # Patience 0 never stops; the best may come last.
    ([0.3, 0.2, 0.1, 0.4], 0, 400, 0.4, [100, 400], None),
    # An improvement resets the count: 1 bad, better, 1 bad, better, then 3 bad stop.
    ([0.5, 0.4, 0.6, 0.55, 0.61, 0.6, 0.6, 0.6], 3, 500, 0.61, [100, 300, 500], 800),
    # Patience 1: the first evaluation that does not improve stops.
    ([0.2, 0.3, 0.3], 1, 200, 0.3, [100, 200], 300),
])
def test_selection_of_hand_computed_sequences(values, patience, best_step, best_value, improved,
                                              stopped_at):
    selection, steps, stop = run_selection(values, patience=patience)
    assert (selection.best_step, selection.best_value) == (best_step, best_value)
    assert steps == improved
    assert stop == stopped_at


def test_lower_is_better_for_losses():
    assert not greater_is_better("eval_loss") and not greater_is_better("loss")
    assert greater_is_better("eval_f1") and greater_is_better("eval_matthews_corrcoef")
    selection, improved, stop = run_selection([0.9, 0.7, 0.8, 0.75, 0.71], metric="eval_loss",
                                              patience=3)
    assert (selection.best_step, selection.best_value, improved) == (200, 0.7, [100, 200])
    assert stop == 500  # 0.8, 0.75, 0.71: none below 0.7


def test_threshold_counts_small_gains_against_patience():
    """Gains of 0.005 (<= threshold 0.01) still make the best step (as transformers' best
    model) but do not reset the count: the third such evaluation stops."""
    values = [0.5, 0.505, 0.51, 0.515, 0.6]
    selection, improved, stop = run_selection(values, patience=3, threshold=0.01)
    assert improved == [100, 200, 300, 400]
    assert stop == 400 and selection.best_step == 400
    # Without the threshold the same sequence never stops.
    assert run_selection(values, patience=3)[2] is None
    # A gain of more than the threshold resets it.
    assert run_selection([0.5, 0.505, 0.52, 0.521, 0.522], patience=3, threshold=0.01)[2] is None


def test_a_value_that_is_no_number_is_beaten_by_any_number():
    selection, improved, _ = run_selection([math.nan, 0.1, math.nan, 0.05], metric="eval_pearson")
    assert (selection.best_step, selection.best_value, improved) == (200, 0.1, [100, 200])


# ---- The record in output_dir/best.
class FakeCheckpoint:
    """What BestCheckpoint.update writes the weights with (tf.train.Checkpoint.write): files
    named as TF names them."""

    def __init__(self):
        self.written = []

    def write(self, prefix):
        self.written.append(os.path.basename(prefix))
        for suffix in (".index", ".data-00000-of-00001"):
            with open(prefix + suffix, "w") as f:
                f.write("weights")


def test_record_keeps_the_best_weights_and_resumes(tmp_path):
    directory = str(tmp_path / "best")
    checkpoint = FakeCheckpoint()
    best = BestCheckpoint(directory, "eval_f1", patience=2, keep=True)
    for step, value in ((1, 0.4), (2, 0.6), (3, 0.5)):
        best.update(step, {"eval_f1": value, "global_step": step}, checkpoint)
    assert checkpoint.written == ["model.ckpt-1", "model.ckpt-2"]  # the best ones only
    assert sorted(os.listdir(directory)) == [RECORD_FILE, "model.ckpt-2.data-00000-of-00001",
                                             "model.ckpt-2.index"]
    with open(os.path.join(directory, RECORD_FILE)) as f:
        record = json.load(f)
    assert record["checkpoint"] == "model.ckpt-2"
    assert record["selection"]["evaluations"] == [[1, 0.4], [2, 0.6], [3, 0.5]]
    assert best.result_lines() == {"best_step": 2, "best_eval_f1": 0.6}

    # A run resumed from the checkpoint at step 3 goes on: one more without improvement stops.
    resumed = BestCheckpoint(directory, "eval_f1", patience=2, keep=True)
    assert resumed.resume(3)
    assert resumed.best_checkpoint == os.path.join(directory, "model.ckpt-2")
    resumed.update(4, {"eval_f1": 0.55}, checkpoint)
    assert resumed.selection.stopped and resumed.stopped_at_step == 4
    assert resumed.result_lines() == {"best_step": 2, "best_eval_f1": 0.6,
                                      "early_stopping_step": 4}

    # Resumed from step 2 (later evaluations were of checkpoints it makes again): not stopped.
    again = BestCheckpoint(directory, "eval_f1", patience=2, keep=True)
    assert again.resume(2)
    assert again.selection.evaluations == [[1, 0.4], [2, 0.6]]
    assert not again.selection.stopped and again.stopped_at_step is None
    # A run that starts afresh takes nothing.
    assert not BestCheckpoint(directory, "eval_f1", keep=True).resume(None)
    # Another metric than the record's is refused before any work.
    with pytest.raises(InputError, match="best_metric: .*chooses by 'eval_f1'"):
        BestCheckpoint(directory, "eval_accuracy").check_record()


def test_a_metric_the_results_lack_names_best_metric(tmp_path):
    best = BestCheckpoint(str(tmp_path / "best"), "eval_f1_PER")
    with pytest.raises(InputError, match="best_metric: 'eval_f1_PER' is not in"):
        best.update(1, {"eval_f1": 0.5, "global_step": 1}, FakeCheckpoint())


def test_a_run_resumed_at_its_early_stop_stays_stopped(tmp_path):
    """A run that stopped early at step 20 (patience 1: 0.5 after 0.6), resumed from its
    step-20 checkpoint, has stopped there: the record's stop is kept (nothing to train, and
    eval_results.txt still says early_stopping_step 20)."""
    directory = str(tmp_path / "best")
    best = BestCheckpoint(directory, "eval_accuracy", patience=1)
    for step, value in ((10, 0.6), (20, 0.5)):
        best.update(step, {"eval_accuracy": value}, FakeCheckpoint())
    assert best.stopped_at_step == 20
    resumed = BestCheckpoint(directory, "eval_accuracy", patience=1)
    assert resumed.resume(20)
    assert resumed.selection.stopped and resumed.stopped_at_step == 20
    assert resumed.result_lines() == {"best_step": 10, "best_eval_accuracy": 0.6,
                                      "early_stopping_step": 20}


def test_the_last_evaluation_is_no_early_stop(tmp_path):
    """Patience running out at the last evaluation of training (`final`) stops nothing early:
    no early_stopping_step, in the results or the record."""
    best = BestCheckpoint(str(tmp_path / "best"), "eval_loss", patience=1)
    best.update(10, {"eval_loss": 0.5}, FakeCheckpoint())
    best.update(20, {"eval_loss": 0.7}, FakeCheckpoint(), final=True)
    assert best.selection.without_improvement == 1  # the count as the rule has it
    assert best.stopped_at_step is None
    assert best.result_lines() == {"best_step": 10, "best_eval_loss": 0.5}
    with open(os.path.join(best.directory, RECORD_FILE)) as f:
        assert json.load(f)["stopped_at_step"] is None


@pytest.mark.parametrize("fields, flag", [
    (dict(keep_best_checkpoint=True, do_eval=True), "--keep_best_checkpoint: needs"),
    (dict(early_stopping_patience=2, do_train=True, do_eval=True),
     "--early_stopping_patience: needs"),
    (dict(early_stopping_patience=-1), "--early_stopping_patience: must be >= 0"),
    (dict(early_stopping_threshold=0.1, keep_best_checkpoint=True), "--early_stopping_threshold"),
    (dict(best_metric="eval_f1", do_train=True, do_eval=True, eval_during_training=True),
     "--best_metric: chooses nothing"),
])
def test_settings_refuse_what_cannot_choose(tmp_path, fields, flag):
    from bert_tf.errors import name_arguments_as_flags
    settings = RunSettings(str(tmp_path / "out"), num_train_steps=10,
                           **dict(dict(do_train=True), **fields))
    with name_arguments_as_flags(), pytest.raises(InputError) as error:
        settings.validate()
    assert str(error.value).startswith(flag), error.value


@pytest.mark.parametrize("options, main_metric", [
    (dict(labels=["0", "1"], task_metric="f1"), "eval_f1"),  # MRPC, QQP
    (dict(labels=["0", "1"], task_metric="matthews_corrcoef"), "eval_matthews_corrcoef"),  # CoLA
    (dict(labels=None, task_metric="correlation"), "eval_pearson"),  # STS-B
    (dict(labels=None), "eval_loss"),  # regression without a task metric
    (dict(labels=["contradiction", "entailment", "neutral"]), "eval_accuracy"),  # MNLI
    (dict(labels=["a b", "c", "d"], multi_label=True), "eval_micro_f1"),
])
def test_classification_main_metric_is_in_its_eval_results(options, main_metric):
    """The keys a task declares before any evaluation (what --best_metric is checked against)
    are the keys its eval_results returns."""
    import numpy as np
    from bert_tf.tasks.classification.task import ClassificationConfig, ClassificationTask

    task = ClassificationTask(ClassificationConfig(**options))
    config, rows = task.config, 6
    rng = np.random.default_rng(0)
    if config.multi_label:
        labels = rng.integers(0, 2, (rows, config.num_labels)).astype(np.int32)
        predictions = rng.integers(0, 2, (rows, config.num_labels)).astype(np.int32)
    elif config.regression:
        labels, predictions = rng.random(rows).astype(np.float32), rng.random(rows)
    else:
        labels = rng.integers(0, config.num_labels, rows).astype(np.int32)
        predictions = rng.integers(0, config.num_labels, rows).astype(np.int32)
    results = task.eval_results({"per_example_loss": rng.random(rows), "label": labels,
                                 "prediction": predictions,
                                 "is_real_example": np.ones(rows, np.float32)}, 3, 2)
    assert task.eval_metric_names() == set(results)
    assert task.main_metric() == main_metric


# ---- End to end.
TINY = {"vocab_size": 30522, "hidden_size": 16, "num_hidden_layers": 1,
        "num_attention_heads": 2, "intermediate_size": 32, "max_position_embeddings": 64,
        "type_vocab_size": 2}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, shared_data, uncased_vocab):
    """Real MRPC rows (48 train, 24 dev, 8 test) and the tiny config."""
    root = tmp_path_factory.mktemp("best_checkpoint")
    data = root / "MRPC"
    data.mkdir()
    for name, rows in (("train.tsv", 48), ("dev.tsv", 24), ("test.tsv", 8)):
        with open(shared_data / "glue_data" / "MRPC" / name, encoding="utf-8") as f:
            lines = f.readlines()[:rows + 1]  # + the header
        (data / name).write_text("".join(lines), encoding="utf-8")
    config = root / "bert_config.json"
    config.write_text(json.dumps(TINY))
    return {"root": root, "data": data, "config": config, "vocab": uncased_vocab}


def classifier_flags(workspace, output_dir, **extra):
    flags = dict(task_name="MRPC", data_dir=workspace["data"], vocab_file=workspace["vocab"],
                 bert_config_file=workspace["config"], max_seq_length=32, output_dir=output_dir,
                 train_batch_size=8, eval_batch_size=8, predict_batch_size=8, seed=1,
                 learning_rate=0.01)
    flags.update(extra)
    return flags


METRIC = "eval_loss"  # lower is better; it moves at every step, where F1 of a tiny model jumps


@pytest.fixture(scope="module")
def trained(workspace):
    """run_classifier with a checkpoint and an evaluation every step, choosing by eval_loss:
    half an epoch (3 steps, as a run killed there), then the run again with 2 epochs (12
    steps: it resumes at step 3), with patience 2."""
    output_dir = workspace["root"] / "out"
    logs = []
    for epochs, patience in ((0.5, 0), (2, 2)):
        status, log = run_command_line("run.run_classifier", classifier_flags(
            workspace, output_dir, do_train=True, do_eval=True, do_predict=epochs == 2,
            eval_during_training=True, keep_best_checkpoint=True, best_metric=METRIC,
            early_stopping_patience=patience, save_checkpoints_steps=1,
            num_train_epochs=epochs, warmup_proportion=0))
        assert status == 0, log[-3000:]
        logs.append(log)
    return output_dir, logs


@pytest.mark.slow
def test_chosen_step_is_the_best_of_the_evaluations(trained):
    output_dir, (first, second) = trained
    history = eval_history(first, METRIC)
    history.update(eval_history(second, METRIC))
    # The oracle: the first step of the lowest loss among the steps evaluated.
    steps = sorted(history)
    best_step = min(steps, key=lambda s: (history[s], s))
    results = read_eval_results(output_dir / "eval_results.txt")
    assert int(results["best_step"]) == best_step
    assert results[f"best_{METRIC}"] == f"{history[best_step]:.8g}".rstrip("0")
    # The final eval is the best checkpoint's (its results, at its step).
    assert int(results["global_step"]) == best_step
    assert float(results[METRIC]) == history[best_step]
    # The resumed run went on from the first's record, its evaluations after step 3.
    assert sorted(eval_history(first, METRIC)) == [1, 2, 3]
    assert "resuming from" in second and f"best {METRIC} so far" in second
    assert min(eval_history(second, METRIC)) == 4
    with open(output_dir / "best" / RECORD_FILE) as f:
        record = json.load(f)
    assert [step for step, _ in record["selection"]["evaluations"]] == steps
    assert record["checkpoint"] == f"model.ckpt-{best_step}"
    assert os.path.exists(output_dir / "best" / f"model.ckpt-{best_step}.index")
    # The folder as a checkpoint (--init_checkpoint, export_savedmodel, the API) is the best.
    from bert_tf.model.checkpoints import resolve_checkpoint
    assert resolve_checkpoint(output_dir) == ("tf", str(output_dir / "best" /
                                                        f"model.ckpt-{best_step}"))


@pytest.mark.slow
def test_training_stops_after_the_patience(trained):
    output_dir, (first, second) = trained
    history = eval_history(first, METRIC)
    history.update(eval_history(second, METRIC))
    steps = sorted(history)
    # The oracle: the step of the second evaluation in a row not below the best before it.
    best, without, stop = math.inf, 0, None
    for step in steps:
        without = 0 if history[step] < best else without + 1
        best = min(best, history[step])
        if without == 2:
            stop = step
            break
    assert stop is not None and stop < 12, history  # the data must make it stop early
    assert steps[-1] == stop  # no evaluation after the stop
    results = read_eval_results(output_dir / "eval_results.txt")
    assert int(results["early_stopping_step"]) == stop
    assert f"early stopping at step {stop}" in first + second
    assert int(results["best_step"]) != stop  # so the predictions below are not the latest's


@pytest.mark.slow
def test_predictions_come_from_the_best_checkpoint(trained, workspace):
    """test_results.tsv of the run is what the kept best weights predict (read by the Python
    API from the folder, strings tokenized in the graph), not what the latest checkpoint
    predicts."""
    import dataclasses

    import numpy as np
    import tensorflow as tf
    from bert_tf.api import load_classifier, model_files

    output_dir, _ = trained
    with open(workspace["data"] / "test.tsv", encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f][1:]  # MRPC: #1 String, #2 String
    run_probabilities = np.array([[float(v) for v in line.split("\t")] for line in
                                  (output_dir / "test_results.tsv").read_text().splitlines()])
    texts, pairs = [row[3] for row in rows], [row[4] for row in rows]
    best = load_classifier(output_dir).predict(texts, pairs)
    np.testing.assert_allclose(best, run_probabilities, atol=1e-5)
    latest = tf.train.latest_checkpoint(str(output_dir))
    results = read_eval_results(output_dir / "eval_results.txt")
    assert not latest.endswith(f"-{results['best_step']}")
    files = dataclasses.replace(model_files(output_dir), checkpoint=latest)
    assert np.abs(load_classifier(files).predict(texts, pairs) - run_probabilities).max() > 1e-4


class Killed(Exception):
    """A run killed from outside."""


@pytest.mark.slow
def test_a_checkpoint_saved_but_not_evaluated_is_evaluated_on_resume(workspace, tmp_path,
                                                                     monkeypatch):
    """A run killed after its step-3 checkpoint was saved, before that checkpoint's evaluation
    was recorded: the rerun resumes at step 3 and evaluates that checkpoint first, so every
    checkpoint is compared, as in a run not killed."""
    from bert_tf.model.config import BertConfig
    from bert_tf.tasks.classification import get_processor
    from bert_tf.tasks.classification.task import prepare_task
    from bert_tf.tasks.preprocessor import read_splits
    from bert_tf.text.fast_tokenization import FastTokenizer
    from bert_tf.training import runner

    processor = get_processor("mrpc")
    output_dir = tmp_path / "out"
    prepared = prepare_task(
        BertConfig.from_dict(TINY), read_splits(processor, workspace["data"], ("train", "eval")),
        processor.get_labels(), FastTokenizer(str(workspace["vocab"])), 32, output_dir,
        task_name="mrpc", eval_batch_size=8, train_batch_size=8, num_train_epochs=1.0,
        log=lambda line: None)
    settings = RunSettings(output_dir=str(output_dir), do_train=True, do_eval=True,
                           eval_during_training=True, keep_best_checkpoint=True,
                           best_metric=METRIC, save_checkpoints_steps=1, num_train_steps=5,
                           train_batch_size=8, learning_rate=0.01, seed=1)
    update = BestCheckpoint.update

    def killed_before_recording_step_3(best, step, *args, **kwargs):
        if step == 3:
            raise Killed
        return update(best, step, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(BestCheckpoint, "update", killed_before_recording_step_3)
        with pytest.raises(Killed):
            runner.run(prepared.task, settings, log=lambda line: None)
    record_path = output_dir / "best" / RECORD_FILE
    assert [step for step, _ in json.loads(record_path.read_text())["selection"][
        "evaluations"]] == [1, 2]
    logged = []
    runner.run(prepared.task, settings, log=logged.append)
    assert "step 3: the restored checkpoint has no recorded evaluation: evaluating it" in logged
    record = json.loads(record_path.read_text())
    assert [step for step, _ in record["selection"]["evaluations"]] == [1, 2, 3, 4, 5]


@pytest.mark.slow
def test_bad_best_metric_is_one_error_line(workspace, tmp_path):
    """A --best_metric the task's results lack: refused before any record is written."""
    output_dir = tmp_path / "out"
    output_dir.mkdir()
    (output_dir / "mine.txt").write_text("kept")
    assert_one_line_error("run.run_classifier", classifier_flags(
        workspace, output_dir, do_train=True, do_eval=True, eval_during_training=True,
        keep_best_checkpoint=True, best_metric="eval_matthews_corrcoef"),
        "--best_metric: 'eval_matthews_corrcoef' is not in the task's eval results")
    assert os.listdir(output_dir) == ["mine.txt"]


def test_the_first_number_after_nan_scores_restarts_the_patience():
    """Pearson of constant predictions is NaN: the first number after NaN evaluations is an
    improvement (the best so far), so patience counts from it, as from any new best. With
    patience 2, [nan, nan, 0.1, 0.05] has one evaluation without improvement after the best,
    not three; the stop comes at the second (by hand, as transformers' EarlyStoppingCallback
    counts from its best)."""
    selection = Selection("pearson", patience=2)
    for step, value in ((1, math.nan), (2, math.nan), (3, 0.1), (4, 0.05)):
        selection.update(step, value)
    assert (selection.best_step, selection.without_improvement) == (3, 1)
    assert not selection.stopped
    selection.update(5, 0.02)
    assert selection.stopped and selection.best_step == 3
