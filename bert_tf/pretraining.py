"""Pretraining loss and eval metrics: the original run_pretraining's, on BertPretrainer outputs.

Loss (the original's `get_masked_lm_output` + `get_next_sentence_output`):
    masked_lm_loss     = sum(w * nll) / (sum(w) + 1e-5)      over the batch's masked positions
    next_sentence_loss = mean(nll)                             over the batch's examples
    loss               = masked_lm_loss + next_sentence_loss

Eval (the original's `metric_fn` through TPUEstimator.evaluate): over all eval batches,
    masked_lm_accuracy / masked_lm_loss   weighted by masked_lm_weights,
    next_sentence_accuracy / next_sentence_loss   per example,
    loss   = mean over eval batches of the batch loss above, global_step.

`PretrainingTask` plugs these into the generic loops of `bert_tf.training`. A batch there may be
split over replicas and gradient-accumulation micro-batches; the task then returns each shard's
*share* of the global-batch value (its sums divided by the global-batch normalizers), so that the
shares add up to exactly what the original computes on the whole batch on one device.
"""
import numpy as np
import tensorflow as tf

MASKED_LM_EPSILON = 1e-5  # the original's denominator guard
MODEL_INPUTS = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions")


def cast_features(features):
    """int64 -> int32 for every feature (tf.Example stores int64; the original casts on read)."""
    return {name: tf.cast(t, tf.int32) if t.dtype == tf.int64 else t
            for name, t in features.items()}


def masked_lm_example_loss(masked_lm_log_probs, masked_lm_ids):
    """Per-position negative log-likelihood [B, P] (the original's per_example_loss, reshaped).

    As the original: -sum(log_probs * one_hot(ids)). Picking the entry with a gather gives the
    same number, but its gradient is a scatter into [B, P, V] zeros that took 12 ms a training
    step on this CPU (5% of the small config's step); the one-hot's is one multiply.
    """
    log_probs = tf.cast(masked_lm_log_probs, tf.float32)
    one_hot = tf.one_hot(tf.cast(masked_lm_ids, tf.int32), tf.shape(log_probs)[-1])
    return -tf.reduce_sum(log_probs * one_hot, axis=-1)


def next_sentence_example_loss(next_sentence_log_probs, next_sentence_labels):
    """Per-example negative log-likelihood [B]."""
    labels = tf.reshape(tf.cast(next_sentence_labels, tf.int32), [-1])
    return -tf.gather(tf.cast(next_sentence_log_probs, tf.float32), labels, batch_dims=1)


def pretraining_loss(outputs, batch, normalizers=None):
    """(loss, masked_lm_loss, next_sentence_loss) exactly as the original for a whole batch.

    `normalizers` (see `PretrainingTask.normalizers`) replaces this batch's sum(w) and example
    count by those of the global batch when `batch` is one shard of it.
    """
    weights = tf.cast(batch["masked_lm_weights"], tf.float32)
    mlm_nll = masked_lm_example_loss(outputs["masked_lm_log_probs"], batch["masked_lm_ids"])
    nsp_nll = next_sentence_example_loss(outputs["next_sentence_log_probs"],
                                         batch["next_sentence_labels"])
    if normalizers is None:
        weight_total = tf.reduce_sum(weights)
        example_total = tf.cast(tf.size(nsp_nll), tf.float32)
    else:
        weight_total = normalizers["masked_lm_weight"]
        example_total = normalizers["examples"]
    masked_lm_loss = tf.reduce_sum(weights * mlm_nll) / (weight_total + MASKED_LM_EPSILON)
    next_sentence_loss = tf.reduce_sum(nsp_nll) / example_total
    return masked_lm_loss + next_sentence_loss, masked_lm_loss, next_sentence_loss


def _correct(log_probs, labels):
    predictions = tf.argmax(log_probs, axis=-1, output_type=tf.int32)
    return tf.cast(tf.equal(predictions, tf.cast(labels, tf.int32)), tf.float32)


def eval_sums(outputs, batch):
    """Per-batch sums from which `eval_results` rebuilds the original's metrics (float32)."""
    weights = tf.cast(batch["masked_lm_weights"], tf.float32)
    mlm_nll = masked_lm_example_loss(outputs["masked_lm_log_probs"], batch["masked_lm_ids"])
    labels = tf.reshape(batch["next_sentence_labels"], [-1])
    nsp_nll = next_sentence_example_loss(outputs["next_sentence_log_probs"], labels)
    return {
        "masked_lm_weight": tf.reduce_sum(weights),
        "masked_lm_loss_sum": tf.reduce_sum(weights * mlm_nll),
        "masked_lm_correct": tf.reduce_sum(
            weights * _correct(outputs["masked_lm_log_probs"], batch["masked_lm_ids"])),
        "examples": tf.cast(tf.size(labels), tf.float32),
        "next_sentence_loss_sum": tf.reduce_sum(nsp_nll),
        "next_sentence_correct": tf.reduce_sum(
            _correct(outputs["next_sentence_log_probs"], labels)),
    }


def eval_results(step_sums, global_step):
    """The original's eval_results dict from the per-step sums of all eval batches.

    The values are numpy float32 (global_step int64) like TPUEstimator.evaluate's, so that
    `format_eval_results` prints them as the original does.
    """
    batch_losses, totals = [], {}
    for sums in step_sums:
        sums = {k: np.float64(v) for k, v in sums.items()}
        batch_losses.append(sums["masked_lm_loss_sum"] / (sums["masked_lm_weight"] + MASKED_LM_EPSILON)
                            + sums["next_sentence_loss_sum"] / sums["examples"])
        for key, value in sums.items():
            totals[key] = totals.get(key, 0.0) + value

    def ratio(num, den):
        return np.float32(totals[num] / totals[den]) if totals.get(den) else np.float32(0.0)

    return {
        "global_step": np.int64(global_step),
        "loss": np.float32(np.mean(batch_losses)) if batch_losses else np.float32(0.0),
        "masked_lm_accuracy": ratio("masked_lm_correct", "masked_lm_weight"),
        "masked_lm_loss": ratio("masked_lm_loss_sum", "masked_lm_weight"),
        "next_sentence_accuracy": ratio("next_sentence_correct", "examples"),
        "next_sentence_loss": ratio("next_sentence_loss_sum", "examples"),
    }


def format_eval_results(results):
    """The original's eval_results.txt: `key = value` lines, keys sorted, str() of each value."""
    return "".join("%s = %s\n" % (key, str(results[key])) for key in sorted(results))


class PretrainingTask:
    """Masked-LM + next-sentence pretraining for the generic loops in `bert_tf.training`.

    The contract (shared by every task that uses bert_tf.training):
      outputs(model, batch, training) -> the model's outputs on the batch;
      normalizers(batch) -> dict of float32 sums over a batch (summed over shards by the loop);
      train_metrics(batch, outputs, normalizers) -> dict with "loss" and other scalars, each the
        shard's share of the global-batch value (the shares are summed by the loop);
      eval_sums(batch, outputs) -> dict of float32 sums (summed over replicas per step);
      eval_results(step_sums, global_step) -> the final metrics dict.
    """

    train_metric_names = ("loss", "masked_lm_loss", "next_sentence_loss", "masked_lm_accuracy",
                          "next_sentence_accuracy")

    def outputs(self, model, batch, training):
        """The heads' outputs only: the model then skips the last layer's work at positions
        that neither head reads."""
        inputs = {name: batch[name] for name in MODEL_INPUTS}
        return model(inputs, training=training, return_encoder_outputs=False)

    def normalizers(self, batch):
        return {"masked_lm_weight": tf.reduce_sum(tf.cast(batch["masked_lm_weights"], tf.float32)),
                "examples": tf.cast(tf.shape(batch["input_ids"])[0], tf.float32)}

    def train_metrics(self, batch, outputs, normalizers):
        loss, masked_lm_loss, next_sentence_loss = pretraining_loss(outputs, batch, normalizers)
        weights = tf.cast(batch["masked_lm_weights"], tf.float32)
        mlm_correct = weights * _correct(outputs["masked_lm_log_probs"], batch["masked_lm_ids"])
        nsp_correct = _correct(outputs["next_sentence_log_probs"],
                               tf.reshape(batch["next_sentence_labels"], [-1]))
        return {
            "loss": loss,
            "masked_lm_loss": masked_lm_loss,
            "next_sentence_loss": next_sentence_loss,
            "masked_lm_accuracy": tf.reduce_sum(mlm_correct) / tf.maximum(
                normalizers["masked_lm_weight"], MASKED_LM_EPSILON),
            "next_sentence_accuracy": tf.reduce_sum(nsp_correct) / normalizers["examples"],
        }

    def eval_sums(self, batch, outputs):
        return eval_sums(outputs, batch)

    def eval_results(self, step_sums, global_step):
        return eval_results(step_sums, global_step)
