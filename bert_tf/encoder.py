"""BertEncoder: the original `modeling.BertModel` as a Keras 3 model.

Called on {"input_ids", "input_mask", "segment_ids"} (int [B, T]; mask and segments optional as in
the original: all ones / all zeros) it returns
    {"sequence_output": [B, T, H], "pooled_output": [B, H],
     "encoder_outputs": [L x [B, T, H]], "embedding_output": [B, T, H]}
in the compute dtype of its dtype policy (float32, or bfloat16/float16 under mixed precision).
The weights are created at construction, so a checkpoint can be loaded before the first call.
"""
import keras
import tensorflow as tf

from bert_tf.config import BertConfig, SerializesBertConfig
from bert_tf.layers import BertEmbeddings, BertPooler, TransformerLayer, attention_bias_from_mask


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

    @property
    def transformer_layers(self):
        return [getattr(self, f"layer_{i}") for i in range(self.config.num_hidden_layers)]

    @property
    def word_embeddings(self):
        """The [vocab_size, hidden_size] table (the masked-LM output is tied to it)."""
        return self.embeddings.word_embeddings

    def call(self, inputs, training=False):
        input_ids = inputs["input_ids"]
        input_mask = inputs.get("input_mask")
        segment_ids = inputs.get("segment_ids")
        if input_mask is None:
            input_mask = tf.ones_like(input_ids)
        if segment_ids is None:
            segment_ids = tf.zeros_like(input_ids)
        seq_length = input_ids.shape[1] or tf.shape(input_ids)[1]
        hidden_size = self.config.hidden_size

        def unflatten(x):
            return tf.reshape(x, [-1, seq_length, hidden_size])

        x = self.embeddings(input_ids, segment_ids, training=training)
        embedding_output = x
        attention_bias = attention_bias_from_mask(input_mask, x.dtype)
        encoder_outputs = []
        for layer in self.transformer_layers:
            x = layer(x, attention_bias, seq_length=seq_length, training=training)
            encoder_outputs.append(unflatten(x))
        sequence_output = encoder_outputs[-1]
        return {
            "sequence_output": sequence_output,
            "pooled_output": self.pooler(sequence_output),
            "encoder_outputs": encoder_outputs,
            "embedding_output": unflatten(embedding_output),
        }
