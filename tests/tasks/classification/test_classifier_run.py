"""run.run_classifier end to end against the original's run_classifier (subprocesses for ours).

The reference's own functions build the oracle: its processors and
file_based_convert_examples_to_features write the records, its model_fn (create_model +
metric_fn, driven without Estimator as TPUEstimator would) evaluates and predicts from a TF1
checkpoint in the original naming with a classifier head (output_weights / output_bias).
- eval_results.txt and test_results.tsv of ours equal the original's for that checkpoint, on
  real MRPC rows (the per-class scores and eval_confusion_matrix.tsv, which the original
  lacks, equal scikit-learn's on the original's predictions); with --use_tpu the original pads
  its eval batches, which changes "loss": ours follows;
- --bucket_by_length gives the same numbers within float tolerance;
- a checkpoint we train and save with --save_original_checkpoint loads into the original's
  model_fn and predicts what ours predicts;
- two MultiWorkerMirrored workers, one killed mid-run, resume and end where an uninterrupted
  run ends;
- bad input exits with a one-line error naming the flag or file.
"""
import contextlib
import json
import os
import sys

import numpy as np
import pytest

from command_lines import run_line
from conftest import (assert_same_checkpoints, command_env, eval_history,
                      kill_a_worker_and_resume, read_eval_numbers, require_module,
                      stub_estimator)

pytestmark = pytest.mark.slow

TINY = {"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
        "intermediate_size": 64, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 128,
        "type_vocab_size": 2, "initializer_range": 0.02}
SEQ = 64
GLOBAL_STEP = 7


def command(output_dir, **flags):
    line = [sys.executable, "-m", "run.run_classifier"]
    for name, value in flags.items():
        line.append(f"--{name}" if value is True else f"--{name}={value}")
    line.append(f"--output_dir={output_dir}")
    return line


def run(line, expect=0, timeout=300):
    process = run_line(line, command_env(TF_CPP_MIN_LOG_LEVEL="2"), timeout=timeout)
    output = process.stdout + process.stderr
    assert process.returncode == expect, output[-4000:]
    return output


def read_probabilities(path):
    with open(path) as f:
        return np.array([[float(v) for v in line.rstrip("\n").split("\t")] for line in f])


@contextlib.contextmanager
def tf1_tensor_shapes(v1):
    """The original's create_model reads `shape[-1].value` (TF1 TensorShape); only while its
    graph is built, so that our eager code in the same process keeps TF2 shapes."""
    v1.disable_v2_tensorshape()
    try:
        yield
    finally:
        v1.enable_v2_tensorshape()


@pytest.fixture(scope="module")
def reference(refbert):
    """(run_classifier module, a stand-in for tf.estimator's names)."""
    rc = refbert.import_reference("run_classifier")
    return rc, stub_estimator(rc)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, shared_data, uncased_vocab, refbert, reference):
    """A small MRPC data dir (real rows: 64 train, 45 dev, 30 test), the tiny config and a TF1
    checkpoint of the original's classifier graph (random weights, global_step 7)."""
    import json
    root = tmp_path_factory.mktemp("run_classifier")
    data = root / "MRPC"
    data.mkdir()
    source = shared_data / "glue_data" / "MRPC"
    for name, rows in (("train.tsv", 64), ("dev.tsv", 45), ("test.tsv", 30)):
        with open(source / name, encoding="utf-8") as f:
            lines = f.readlines()[:rows + 1]  # + the header
        with open(data / name, "w", encoding="utf-8") as f:
            f.writelines(lines)
    config = root / "bert_config.json"
    config.write_text(json.dumps(TINY))
    found = {"root": root, "data": data, "config": str(config), "vocab": str(uncased_vocab)}
    # The head starts at zero bias in the original: give it a value, so a head that is not
    # loaded cannot pass. The random encoder's class-1-over-class-0 logits differ little from
    # row to row (by about 5e-5): a bias that puts the decision boundary in the widest gap
    # between the dev rows' logits (a few 1e-6, where ours and the original's differ by about
    # 1e-7) makes the dev predictions hold both classes, so that F1 and each class's scores are
    # not 0 for want of a class.
    equal = write_classifier_checkpoint(refbert, reference, root / "equal_bias" / "model.ckpt",
                                        [0.3, 0.3])
    probabilities = reference_outputs(reference, refbert, found, equal, "dev", "infer")
    margins = np.sort(np.log(probabilities[:, 1]) - np.log(probabilities[:, 0]))
    gaps = np.diff(margins)[1:-1]  # at least two rows on each side
    widest = int(np.argmax(gaps)) + 1
    boundary = float(margins[widest] + margins[widest + 1]) / 2
    found["head_bias"] = [0.3, 0.3 - boundary]
    found["checkpoint"] = write_classifier_checkpoint(
        refbert, reference, root / "original" / "model.ckpt", found["head_bias"])
    return found


def write_classifier_checkpoint(refbert, reference, path, bias_values):
    """The original's classifier graph on TINY, its random weights seeded (the same for every
    call), the head's bias `bias_values`, at GLOBAL_STEP; returns the checkpoint's prefix."""
    v1 = refbert.v1
    rc, _ = reference
    with v1.Graph().as_default(), tf1_tensor_shapes(v1):
        v1.set_random_seed(3)
        ids = v1.zeros([1, SEQ], v1.int32)
        rc.create_model(refbert.modeling.BertConfig.from_dict(TINY), False, ids, ids, ids,
                        v1.zeros([1], v1.int32), 2, False)
        bias = [v for v in v1.global_variables() if v.name == "output_bias:0"][0]
        step = v1.train.get_or_create_global_step()
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            sess.run([bias.assign(bias_values), step.assign(GLOBAL_STEP)])
            return v1.train.Saver().save(sess, str(path), global_step=GLOBAL_STEP)


def reference_outputs(reference, refbert, workspace, checkpoint, split, mode, batch_size=8,
                      use_tpu=False):
    """The original's eval results (mode "eval": metric_fn + loss mean + global_step) or
    probabilities (mode "infer") for `split` ("dev" / "test"), from its own processor and
    record writer; use_tpu pads the examples to full batches, as the original on TPU."""
    rc, spec = reference
    v1 = refbert.v1
    processor = rc.MrpcProcessor()
    examples = (processor.get_dev_examples if split == "dev" else
                processor.get_test_examples)(str(workspace["data"]))
    num_real = len(examples)
    if use_tpu:
        while len(examples) % batch_size:
            examples.append(rc.PaddingInputExample())
    tokenizer = refbert.tokenization.FullTokenizer(workspace["vocab"], do_lower_case=True)
    records = str(workspace["root"] / f"reference_{split}_{use_tpu}.tf_record")
    rc.file_based_convert_examples_to_features(examples, processor.get_labels(), SEQ, tokenizer,
                                               records)
    with v1.Graph().as_default(), tf1_tensor_shapes(v1):
        input_fn = rc.file_based_input_fn_builder(records, SEQ, False, use_tpu)
        features = v1.data.make_one_shot_iterator(
            input_fn({"batch_size": batch_size})).get_next()
        model_fn = rc.model_fn_builder(refbert.modeling.BertConfig.from_dict(TINY), 2,
                                       checkpoint, 5e-5, None, None, False, False)
        model_fn(features, None, mode, {})
        with v1.Session() as sess:
            if mode == "infer":
                sess.run(v1.global_variables_initializer())
                rows = []
                while True:
                    try:
                        rows.append(sess.run(spec.last["predictions"]["probabilities"]))
                    except v1.errors.OutOfRangeError:
                        return np.concatenate(rows)[:num_real]
            metric_fn, tensors = spec.last["eval_metrics"]
            metrics = metric_fn(*tensors)
            metrics["loss"] = v1.metrics.mean(spec.last["loss"])
            sess.run([v1.global_variables_initializer(), v1.local_variables_initializer()])
            update = [op for _, op in metrics.values()]
            while True:
                try:
                    sess.run(update)
                except v1.errors.OutOfRangeError:
                    break
            results = {name: float(sess.run(value)) for name, (value, _) in metrics.items()}
    results["global_step"] = GLOBAL_STEP
    return results


def model_flags(workspace, **extra):
    flags = dict(task_name="MRPC", data_dir=workspace["data"], vocab_file=workspace["vocab"],
                 bert_config_file=workspace["config"], max_seq_length=SEQ, do_lower_case=True)
    flags.update(extra)
    return flags


@pytest.fixture(scope="module")
def evaluated(workspace, tmp_path_factory):
    """Our eval and predict of the original's checkpoint (45 dev rows at batch 8: 3 padding
    examples; 30 test rows: 2), padded and bucketed."""
    outputs = {}
    for name, extra in (("padded", {}), ("bucketed", {"bucket_by_length": True})):
        output_dir = tmp_path_factory.mktemp(name)
        if name == "padded":
            extra = {"export_dir": output_dir / "exported"}
        log = run(command(output_dir, **model_flags(
            workspace, init_checkpoint=workspace["checkpoint"], do_eval=True, do_predict=True,
            **extra)))
        outputs[name] = output_dir, log
    return outputs


def test_eval_and_predict_equal_the_original(workspace, reference, refbert, evaluated):
    """The original (no TPU) runs 5 batches of 8 and a last one of 5 real examples; ours pads
    it with 3 padding examples and reports the same numbers."""
    output_dir, log = evaluated["padded"]
    assert "eval: 45 examples (+3 padding)" in log
    assert "predict: 30 examples (+2 padding)" in log
    ours = read_eval_numbers(output_dir / "eval_results.txt")
    expected = reference_outputs(reference, refbert, workspace, workspace["checkpoint"], "dev",
                                 "eval")
    per_class = [f"eval_{name}_{label}" for name in ("precision", "recall", "f1")
                 for label in ("0", "1")]
    assert sorted(ours) == sorted(list(expected) + ["eval_f1"] + per_class)
    for key, value in expected.items():
        np.testing.assert_allclose(ours[key], value, rtol=1e-5, err_msg=key)
    # F1, per-class scores and the confusion matrix of the original's own predictions, by
    # scikit-learn.
    sklearn_metrics = require_module("sklearn.metrics", "the F1 and confusion matrix oracle")
    dev_probabilities = reference_outputs(reference, refbert, workspace, workspace["checkpoint"],
                                          "dev", "infer")
    rc, _ = reference
    labels = [int(e.label) for e in rc.MrpcProcessor().get_dev_examples(str(workspace["data"]))]
    predicted = dev_probabilities.argmax(-1)
    assert 0 < predicted.mean() < 1, predicted  # both classes: F1 and per-class scores not 0
    np.testing.assert_allclose(ours["eval_f1"], sklearn_metrics.f1_score(labels, predicted),
                               rtol=1e-6)
    scores = sklearn_metrics.precision_recall_fscore_support(labels, predicted, labels=[0, 1],
                                                             zero_division=0)
    for name, values in zip(("precision", "recall", "f1"), scores):
        for label in (0, 1):
            np.testing.assert_allclose(ours[f"eval_{name}_{label}"], values[label], rtol=1e-6)
    with open(output_dir / "eval_confusion_matrix.tsv") as f:
        rows = [line.rstrip("\n").split("\t") for line in f]
    assert rows[0] == ["gold\\predicted", "0", "1"] and [r[0] for r in rows[1:]] == ["0", "1"]
    np.testing.assert_array_equal([[int(v) for v in r[1:]] for r in rows[1:]],
                                  sklearn_metrics.confusion_matrix(labels, predicted))
    probabilities = read_probabilities(output_dir / "test_results.tsv")
    expected_probabilities = reference_outputs(reference, refbert, workspace,
                                               workspace["checkpoint"], "test", "infer")
    assert probabilities.shape == (30, 2)
    np.testing.assert_allclose(probabilities, expected_probabilities, atol=2e-6)


def test_exported_savedmodel_predicts_as_the_run(evaluated, workspace):
    """--export_dir: the SavedModel's token-id signature gives test_results.tsv's probabilities
    on the predict records (loaded without bert_tf's Python classes)."""
    import tensorflow as tf

    from bert_tf.tasks.classification.preprocessor import classifier_feature_spec

    output_dir, _ = evaluated["padded"]
    serve = tf.saved_model.load(str(output_dir / "exported")).signatures["serving_default"]
    records = tf.data.TFRecordDataset(str(output_dir / "predict.tf_record")).map(
        lambda r: tf.io.parse_single_example(r, classifier_feature_spec(SEQ))).batch(32)
    batch = next(iter(records))
    outputs = serve(**{k: tf.cast(batch[k], tf.int32)
                       for k in ("input_ids", "input_mask", "segment_ids")})
    expected = read_probabilities(output_dir / "test_results.tsv")
    np.testing.assert_allclose(outputs["probabilities"].numpy()[:30], expected, atol=1e-6)
    # The raw-string signature, on the test file's sentence pairs, gives the same.
    import csv
    with open(workspace["data"] / "test.tsv", encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t", quotechar=None))[1:]
    by_text = tf.saved_model.load(str(output_dir / "exported")).signatures["serve_text_pair"](
        text_a=tf.constant([r[3] for r in rows]), text_b=tf.constant([r[4] for r in rows]))
    np.testing.assert_allclose(by_text["probabilities"].numpy(), expected, atol=1e-6)
    # (the label of its own probabilities: the rows lie within 1e-4 of the boundary)
    assert [x.decode() for x in by_text["label"].numpy()] == [
        ["0", "1"][i] for i in by_text["probabilities"].numpy().argmax(axis=1)]


def test_bucketed_batches_give_the_same_numbers(evaluated):
    padded, bucketed = (evaluated[name][0] for name in ("padded", "bucketed"))
    ours, theirs = (read_eval_numbers(d / "eval_results.txt") for d in (padded, bucketed))
    assert sorted(ours) == sorted(theirs)
    for key in ours:
        np.testing.assert_allclose(theirs[key], ours[key], rtol=1e-5, err_msg=key)
    np.testing.assert_allclose(read_probabilities(bucketed / "test_results.tsv"),
                               read_probabilities(padded / "test_results.tsv"), atol=2e-6)


def test_loss_as_the_original_on_tpu(workspace, reference, refbert, evaluated):
    """With --use_tpu the original pads its eval set and the padding examples count in their
    batch's loss; ours averages the same way from the same per-example outputs (in-process: no
    TPU here)."""
    import tensorflow as tf

    from bert_tf.training import gathering
    from bert_tf.model.checkpoints import load_checkpoint
    from bert_tf.tasks.base import Records
    from bert_tf.tasks.classification.task import ClassificationConfig, ClassificationTask
    from bert_tf.model.config import BertConfig

    output_dir, _ = evaluated["padded"]
    task = ClassificationTask(ClassificationConfig(
        bert_config=BertConfig.from_dict(TINY), max_seq_length=SEQ, labels=["0", "1"],
        records={"eval": Records((str(output_dir / "eval.tf_record"),), 48)},
        task_metric="f1", original_pads_eval=True))
    model = task.build_model()
    load_checkpoint(model, workspace["checkpoint"])
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    outputs = gathering.gather_outputs(strategy, model, task, task.dataset_fn("eval", 8), 6)
    ours = task.eval_results(outputs, GLOBAL_STEP, 8)
    expected = reference_outputs(reference, refbert, workspace, workspace["checkpoint"], "dev",
                                 "eval", use_tpu=True)
    unpadded = read_eval_numbers(output_dir / "eval_results.txt")
    assert abs(expected["loss"] - unpadded["loss"]) > 1e-4  # padding does change the loss
    for key, value in expected.items():
        np.testing.assert_allclose(float(ours[key]), value, rtol=1e-5, err_msg=key)


def test_trained_checkpoint_in_the_original_naming_loads_in_the_original(
        workspace, reference, refbert, tmp_path):
    """4 training steps from the original's checkpoint; --save_original_checkpoint writes
    output_weights/output_bias and bert/...; the original's model_fn predicts from it what ours
    predicts."""
    import tensorflow as tf

    output_dir = tmp_path / "trained"
    log = run(command(output_dir, **model_flags(
        workspace, init_checkpoint=workspace["checkpoint"], do_train=True, do_predict=True,
        train_batch_size=16, num_train_epochs=1.0, learning_rate=1e-3, seed=2,
        save_original_checkpoint=True)))
    assert "***** Running training *****  batch size 16, 4 steps" in log
    written = tf.train.latest_checkpoint(str(output_dir / "original_format"))
    assert written.endswith("model.ckpt-4")
    names = {name for name, _ in tf.train.list_variables(written)}
    assert {"output_weights", "output_bias", "bert/pooler/dense/kernel", "global_step"} <= names
    trained = tf.train.load_checkpoint(written).get_tensor("output_bias")
    moved = np.abs(trained - np.array(workspace["head_bias"])).max()
    assert moved > 1e-4  # training moved the head
    expected = reference_outputs(reference, refbert, workspace, written, "test", "infer")
    np.testing.assert_allclose(read_probabilities(output_dir / "test_results.tsv"), expected,
                               atol=2e-6)


def test_multi_worker_fine_tuning_resumes_after_a_worker_is_killed(workspace, tmp_path):
    """run_classifier on two MultiWorkerMirrored workers (64 MRPC rows, 7.5 epochs at batch 8:
    60 steps), evaluating every checkpoint and keeping the best; one worker is killed after
    the first checkpoint; restarted, both resume from the last checkpoint and end with the
    weights, the evaluations and the kept checkpoint of an uninterrupted run (the input
    replayed to the step: --seed). The other worker's own best folder is gone."""

    def line_into(output_dir):
        return command(output_dir, **model_flags(
            workspace, init_checkpoint=workspace["checkpoint"], do_train=True, do_eval=True,
            eval_during_training=True, keep_best_checkpoint=True, eval_batch_size=8,
            train_batch_size=8, num_train_epochs=7.5, learning_rate=1e-4, seed=4,
            save_checkpoints_steps=20, iterations_per_loop=20,
            distribution_strategy="multi_worker_mirrored"))

    straight, killed = tmp_path / "straight", tmp_path / "killed"
    step, output = kill_a_worker_and_resume(line_into, straight, killed, 60)
    assert "2 replica(s)" in output and f"[train] done: {60 - step} steps" in output
    assert_same_checkpoints(straight / "model.ckpt-60", killed / "model.ckpt-60")
    history = eval_history(output, "eval_accuracy")
    # After the resume, each later checkpoint (and the one resumed from, unless its
    # evaluation was recorded before the kill).
    assert sorted(s for s in history if s > step) == list(range(step + 20, 61, 20))
    assert set(history) <= set(range(step, 61, 20)), history
    kept = {}
    for output_dir in (straight, killed):
        results = read_eval_numbers(output_dir / "eval_results.txt")
        with open(output_dir / "best" / "best_checkpoint.json") as f:
            record = json.load(f)
        assert record["checkpoint"] == f"model.ckpt-{int(results['best_step'])}"
        assert results["global_step"] == results["best_step"]
        assert not [name for name in os.listdir(output_dir) if name.startswith(".worker_")]
        kept[output_dir.name] = results
    assert kept["killed"] == pytest.approx(kept["straight"], abs=1e-6)
