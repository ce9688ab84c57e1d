"""The encoder alone, for export and feature extraction: no head, no training."""
import tensorflow as tf

from bert_tf.model.encoder import BertEncoder
from bert_tf.tasks.base import Task


class EncoderTask(Task):
    """Serves sequence_output [B, T, H] and pooled_output [B, H] (float32)."""

    name = "encoder"

    def build_model(self):
        return BertEncoder(self.config.bert_config)

    def serving_outputs(self, outputs, from_text=False):
        return {name: tf.cast(outputs[name], tf.float32)
                for name in ("sequence_output", "pooled_output")}
