"""The encoder alone, for export and feature extraction: no head, no training."""
import tensorflow as tf

from bert_tf.tasks.base import Task


class EncoderTask(Task):
    """Serves sequence_output [B, T, H] and pooled_output [B, H] (float32); on raw strings
    sequence_output is [B, max_seq_length, H] (zero rows after each batch's longest text)."""

    name = "encoder"

    def build_model(self):
        from bert_tf.model.encoder import BertEncoder
        return BertEncoder(self.config.bert_config)

    def serving_outputs(self, outputs, from_text=False):
        served = {name: tf.cast(outputs[name], tf.float32)
                  for name in ("sequence_output", "pooled_output")}
        if from_text:  # batches are cut to their longest text; the shape stays the same
            sequence = served["sequence_output"]
            served["sequence_output"] = tf.pad(
                sequence, [[0, 0], [0, self.config.max_seq_length - tf.shape(sequence)[1]],
                           [0, 0]])
        return served
