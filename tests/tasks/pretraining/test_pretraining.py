"""Pretraining loss and eval metrics against the original run_pretraining (the reference release).

The oracle is the reference's own model_fn (BertModel + get_masked_lm_output +
get_next_sentence_output + metric_fn + the Estimator's loss mean) and input_fn, driven in a v1
graph session (see pretraining_fixtures.py) on tiny records written in the original's format.
"""
import numpy as np
import pytest
import tensorflow as tf

import pretraining_fixtures as fx
from bert_tf.data import input_pipeline
from bert_tf.tasks.pretraining import task as pretraining
from bert_tf.tasks.results import format_results

METRIC_KEYS = ["global_step", "loss", "masked_lm_accuracy", "masked_lm_loss",
               "next_sentence_accuracy", "next_sentence_loss"]


@pytest.fixture
def rp(refbert, monkeypatch):
    return fx.reference_run_pretraining(refbert, monkeypatch)


def test_loss_and_metrics_match_metric_fn_on_reference_outputs(rp, refbert, tmp_path):
    """Our loss / eval math on the reference model's own log-probs = the reference's numbers.

    6 steps of batch 4 over 18 records: the eval input repeats, as the original's does.
    """
    paths, _ = fx.write_record_files(tmp_path, 2, 9)
    expected, batches = fx.reference_eval(rp, refbert, paths, None, eval_batch_size=4,
                                          max_eval_steps=6, with_batches=True)
    per_example = []
    for features, values in batches:
        (mlm_example_loss, mlm_log_probs, mlm_ids, mlm_weights, nsp_example_loss, nsp_log_probs,
         nsp_labels) = values
        batch = input_pipeline.cast_int64({k: tf.constant(v) for k, v in features.items()})
        outputs = {
            "masked_lm_log_probs": tf.reshape(mlm_log_probs, [4, fx.MAX_PREDICTIONS, -1]),
            "next_sentence_log_probs": tf.constant(nsp_log_probs),
        }
        # Per-example losses and the batch loss exactly as get_masked_lm_output/next_sentence.
        np.testing.assert_allclose(
            tf.reshape(pretraining.masked_lm_example_loss(outputs["masked_lm_log_probs"],
                                                          batch["masked_lm_ids"]), [-1]),
            mlm_example_loss, rtol=1e-6)
        np.testing.assert_allclose(
            pretraining.next_sentence_example_loss(nsp_log_probs, batch["next_sentence_labels"]),
            nsp_example_loss, rtol=1e-6)
        loss, mlm_loss, nsp_loss = pretraining.pretraining_loss(outputs, batch)
        want_mlm = np.sum(mlm_weights.reshape(-1) * mlm_example_loss) / (np.sum(mlm_weights) + 1e-5)
        np.testing.assert_allclose(mlm_loss, want_mlm, rtol=1e-6)
        np.testing.assert_allclose(nsp_loss, np.mean(nsp_example_loss), rtol=1e-6)
        np.testing.assert_allclose(loss, want_mlm + np.mean(nsp_example_loss), rtol=1e-6)
        per_example.append({k: v.numpy() for k, v in
                            pretraining.eval_outputs(outputs, batch).items()})
    gathered = {k: np.concatenate([p[k] for p in per_example]) for k in per_example[0]}
    ours = pretraining.eval_results(gathered, global_step=0, batch_size=4)
    assert sorted(ours) == METRIC_KEYS
    for key in METRIC_KEYS:
        np.testing.assert_allclose(ours[key], expected[key], rtol=2e-6, err_msg=key)


def test_shares_add_up_to_the_whole_batch_loss():
    """Split a batch in shards: shares computed with global normalizers sum to the batch loss."""
    examples = fx.make_examples(8, seed=3)
    batch = {k: tf.constant(np.stack([e[k] for e in examples])) for k in examples[0]}
    batch = input_pipeline.cast_int64(batch)
    rng = np.random.RandomState(0)
    logits = rng.normal(size=(8, fx.MAX_PREDICTIONS, fx.VOCAB_SIZE)).astype(np.float32)
    outputs = {"masked_lm_log_probs": tf.nn.log_softmax(logits),
               "next_sentence_log_probs": tf.nn.log_softmax(rng.normal(size=(8, 2)).astype(np.float32))}
    task = pretraining.PretrainingTask()
    whole = task.train_metrics(batch, outputs, task.normalizers(batch))
    normalizers = task.normalizers(batch)
    shares = [task.train_metrics({k: v[i:i + 3] for k, v in batch.items()},
                                 {k: v[i:i + 3] for k, v in outputs.items()}, normalizers)
              for i in (0, 3, 6)]
    for name in task.train_metric_names:
        np.testing.assert_allclose(sum(float(s[name]) for s in shares), float(whole[name]),
                                   rtol=1e-5, err_msg=name)
    np.testing.assert_allclose(float(whole["loss"]), float(pretraining.pretraining_loss(outputs, batch)[0]),
                               rtol=1e-6)


def test_format_results_is_the_originals():
    results = {"loss": np.float32(2.5), "global_step": np.int64(20),
               "masked_lm_accuracy": np.float32(1 / 3)}
    # The original's run_pretraining.py: for key in sorted(result.keys()):
    # writer.write("%s = %s\n" % (key, str(result[key]))), on the estimator's numpy values.
    original = "".join("%s = %s\n" % (key, str(results[key])) for key in sorted(results))
    assert format_results(results) == original == (
        "global_step = 20\nloss = 2.5\nmasked_lm_accuracy = 0.33333334\n")
