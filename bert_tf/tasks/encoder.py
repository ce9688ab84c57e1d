"""The encoder alone, for export and feature extraction: no head, no training."""
import tensorflow as tf

from bert_tf.tasks.base import Task


class EncoderTask(Task):
    """Serves sequence_output [B, T, H] and pooled_output [B, H] (float32)."""

    name = "encoder"

    def __init__(self, bert_config):
        self.bert_config = bert_config

    @classmethod
    def for_model(cls, bert_config, **unused_options):
        return cls(bert_config)

    def build_model(self):
        from bert_tf.model.encoder import BertEncoder
        return BertEncoder(self.bert_config)

    def serving_outputs(self, outputs):
        return {name: tf.cast(outputs[name], tf.float32)
                for name in ("sequence_output", "pooled_output")}
