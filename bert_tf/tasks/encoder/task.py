"""The encoder alone, for export and feature extraction: no head, no training."""
import dataclasses

import tensorflow as tf

from bert_tf.model.encoder import BertEncoder
from bert_tf.model.pooling import check_pooling, pool
from bert_tf.tasks import registry
from bert_tf.tasks.base import Task, TaskConfig
from bert_tf.tasks import preprocessor


@dataclasses.dataclass
class EncoderConfig(TaskConfig):
    """Attributes (besides TaskConfig's):
      pooling: None, or "cls", "mean" or "max" (bert_tf.model.pooling): the export then also
        serves `embed_text`, one vector per raw string.
      normalize: the pooled vector divided by its L2 norm (sentence-transformers' Normalize).
    """
    pooling: str = None
    normalize: bool = False

    def __post_init__(self):
        super().__post_init__()
        check_pooling(self.pooling)


@registry.register
class EncoderTask(Task):
    """Serves sequence_output [B, T, H] and pooled_output [B, H] (float32); on raw strings
    sequence_output is [B, max_seq_length, H] (zero rows after each batch's longest text). With
    `config.pooling`, also `embed_text`: raw strings -> `embedding` [B, H] float32."""

    name = "encoder"
    Config = EncoderConfig
    Preprocessor = preprocessor.Preprocessor  # texts packed as the original's examples

    def build_model(self):
        return BertEncoder(self.config.bert_config)

    def export_description(self):
        """The pooling of `embed_text`, when there is one."""
        if self.config.pooling is None:
            return {}
        return {"pooling": self.config.pooling, "normalize": bool(self.config.normalize)}

    def serving_outputs(self, outputs, from_text=False):
        served = {name: tf.cast(outputs[name], tf.float32)
                  for name in ("sequence_output", "pooled_output")}
        if from_text:  # batches are cut to their longest text; the shape stays the same
            sequence = served["sequence_output"]
            served["sequence_output"] = tf.pad(
                sequence, [[0, 0], [0, self.config.max_seq_length - tf.shape(sequence)[1]],
                           [0, 0]])
        return served

    def embeddings(self, outputs, input_mask, hidden_states=None):
        """The pooled vectors [B, H] (float32) of `hidden_states` (default: the last layer,
        `sequence_output`) over the real tokens of `input_mask`, as `config.pooling` and
        `config.normalize` say (bert_tf.model.pooling.pool)."""
        if hidden_states is None:
            hidden_states = outputs["sequence_output"]
        return pool(hidden_states, input_mask, self.config.pooling, self.config.normalize)

    def text_signatures(self, model, preprocessor):
        """`serve_text` and `serve_text_pair` (the default), and with `config.pooling`
        `embed_text`: `text` [B] string -> {"embedding": [B, H] float32}, each text packed as
        `[CLS] text [SEP]` (`Preprocessor.text_inputs`)."""
        signatures = super().text_signatures(model, preprocessor)
        if self.config.pooling is None:
            return signatures

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
        def embed_text(text):
            inputs = preprocessor.text_inputs(text)
            outputs = self.outputs(model, inputs, training=False)
            return {"embedding": self.embeddings(outputs, inputs["input_mask"])}

        signatures["embed_text"] = embed_text
        return signatures
