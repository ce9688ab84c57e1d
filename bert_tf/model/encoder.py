"""BertEncoder: the original `modeling.BertModel` as a Keras 3 model.

Called on {"input_ids", "input_mask", "segment_ids"} (int [B, T]; mask and segments optional as in
the original: all ones / all zeros) it returns
    {"sequence_output": [B, T, H], "pooled_output": [B, H],
     "encoder_outputs": [L x [B, T, H]], "embedding_output": [B, T, H]}
in the compute dtype of its dtype policy (float32, or bfloat16/float16 under mixed precision).
Packed rows (several sequences a row) add "position_ids" and "sequence_ids" [B, T]: positions
restart in each sequence, and a token attends only within its sequence.
The weights are created at construction, so a checkpoint can be loaded before the first call.
"""
import keras
import tensorflow as tf

from bert_tf.model.variable_names import encoder_parts
from bert_tf.model.config import BertConfig, SerializesBertConfig
from bert_tf.model.layers import (BertEmbeddings, BertPooler, TransformerLayer,
                                  attention_bias_from_mask, attention_bias_from_sequence_ids,
                                  gather_positions)


class BertEncoder(SerializesBertConfig, keras.Model):
    """Embeddings, `num_hidden_layers` transformer layers and the pooler of the original BERT.

    Args:
      config: a BertConfig (or its dict).
      name: "bert", the original's variable scope.
      dtype: a Keras dtype policy (default: the global policy).
    """

    def __init__(self, config, name="bert", **kwargs):
        super().__init__(name=name, **kwargs)
        if isinstance(config, dict):
            config = BertConfig.from_dict(config)
        self.config = config
        c = config
        self.embeddings = BertEmbeddings(
            c.vocab_size, c.hidden_size, c.max_position_embeddings, c.type_vocab_size,
            c.initializer_range, c.hidden_dropout_prob, name="embeddings",
            dtype=self.dtype_policy)
        # One attribute per layer (layer_0, layer_1, ...): TF2 checkpoints track attributes,
        # not Keras' wrapped lists.
        for i in range(c.num_hidden_layers):
            setattr(self, f"layer_{i}", TransformerLayer(
                c.hidden_size, c.num_attention_heads, c.intermediate_size, c.hidden_act,
                c.hidden_dropout_prob, c.attention_probs_dropout_prob, c.initializer_range,
                name=f"layer_{i}", dtype=self.dtype_policy))
        self.pooler = BertPooler(c.hidden_size, c.initializer_range, name="pooler",
                                 dtype=self.dtype_policy)
        self.build(None)

    def build(self, input_shape=None):
        self.embeddings.build(None)
        for layer in self.transformer_layers:
            layer.build(None)
        self.pooler.build(None)
        self.built = True

    def original_variable_parts(self):
        """The variables under the original release's names (bert/embeddings/..., ...)."""
        return encoder_parts(self)

    @property
    def transformer_layers(self):
        return [getattr(self, f"layer_{i}") for i in range(self.config.num_hidden_layers)]

    @property
    def word_embeddings(self):
        """The [vocab_size, hidden_size] table (the masked-LM output is tied to it)."""
        return self.embeddings.word_embeddings

    def call(self, inputs, training=False, output_positions=None, cls_positions=None):
        """Returns the outputs described in the module docstring.

        `output_positions` ([B, P] int): for a loss that reads the last layer at a few positions
        only (masked-LM pretraining): the last layer is then computed only at [CLS] (for the
        pooler) and at these positions, and the result holds just "pooled_output" and
        "positions_output" [B, P, H], the same values as gathering "sequence_output" (pretraining
        BERT-Base at seq 128 with 20 predictions: about 5% fewer FLOPs per step).
        `cls_positions` ([B, S] int, packed rows): pool each sequence at its [CLS]:
        "pooled_output" is then [B, S, H].
        """
        input_ids = inputs["input_ids"]
        input_mask = inputs.get("input_mask")
        segment_ids = inputs.get("segment_ids")
        sequence_ids = inputs.get("sequence_ids")
        if input_mask is None:
            input_mask = tf.ones_like(input_ids)
        if segment_ids is None:
            segment_ids = tf.zeros_like(input_ids)
        seq_length = input_ids.shape[1] or tf.shape(input_ids)[1]
        hidden_size = self.config.hidden_size

        def unflatten(x, length=seq_length):
            return tf.reshape(x, [-1, length, hidden_size])

        def pool_at_cls(states):  # [B, S, H] -> [B, S, H]
            rows = states.shape[1] or tf.shape(states)[1]
            return unflatten(self.pooler.dense(tf.reshape(states, [-1, hidden_size])), rows)

        x = self.embeddings(input_ids, segment_ids, training=training,
                            position_ids=inputs.get("position_ids"))
        embedding_output = x
        if sequence_ids is None:
            attention_bias = attention_bias_from_mask(input_mask, x.dtype)
        else:
            attention_bias = attention_bias_from_sequence_ids(sequence_ids, x.dtype)
        *layers, last_layer = self.transformer_layers
        encoder_outputs = []
        for layer in layers:
            x = layer(x, attention_bias, seq_length=seq_length, training=training)
            encoder_outputs.append(unflatten(x))
        if output_positions is not None:
            positions = tf.cast(output_positions, tf.int32)
            cls = (tf.zeros_like(input_ids[:, :1]) if cls_positions is None
                   else tf.cast(cls_positions, tf.int32))
            num_cls = cls.shape[1] or tf.shape(cls)[1]
            positions = tf.concat([cls, positions], axis=1)
            x = last_layer(x, attention_bias, seq_length=seq_length, training=training,
                           positions=positions)
            x = unflatten(x, positions.shape[1] or tf.shape(positions)[1])
            pooled = self.pooler(x) if cls_positions is None else pool_at_cls(x[:, :num_cls])
            return {"pooled_output": pooled, "positions_output": x[:, num_cls:]}
        x = last_layer(x, attention_bias, seq_length=seq_length, training=training)
        encoder_outputs.append(unflatten(x))
        sequence_output = encoder_outputs[-1]
        pooled = (self.pooler(sequence_output) if cls_positions is None
                  else pool_at_cls(gather_positions(sequence_output, cls_positions)))
        return {
            "sequence_output": sequence_output,
            "pooled_output": pooled,
            "encoder_outputs": encoder_outputs,
            "embedding_output": unflatten(embedding_output),
        }
