"""Task heads on top of BertEncoder, with the original's math and variable layout.

All heads return float32 (log-probs or logits) also under mixed precision.
- MaskedLMHead (cls/predictions): on the hidden states at the masked positions (gathered first, as
  the original), transform (dense + activation + LayerNorm), output tied to the word embeddings,
  output bias.
- NextSentenceHead (cls/seq_relationship): 2-way log-probs from the pooled output.
- ClassificationHead (run_classifier's output_weights/output_bias): dropout + logits from the pooled
  output; num_labels=1 is regression.
- SpanHead (run_squad's cls/squad): start/end logits per token.
- TokenClassificationHead: dropout + per-token logits (tagging).
"""
import keras
import tensorflow as tf

from bert_tf.model.cpu_kernels import cpu_kernels_enabled, log_softmax_with_bias
from bert_tf.model.layers import Dropout, HeadTransform, OutputProjection


class MaskedLMHead(keras.layers.Layer):
    """Masked-LM log-probs [B, P, V] (float32) from the masked positions' hidden states, output
    tied to the word embeddings.

    Args:
      embedding_table: a zero-argument callable returning the encoder's word-embedding variable
        (a callable, so that the table is not tracked twice).
    """

    def __init__(self, vocab_size, hidden_size, hidden_act="gelu", initializer_range=0.02,
                 embedding_table=None, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.hidden_act = hidden_act
        self.initializer_range = initializer_range
        self.embedding_table = embedding_table
        self.transform = HeadTransform(hidden_size, hidden_act, initializer_range,
                                       name="transform", dtype=self.dtype_policy)

    def build(self, input_shape=None):
        self.transform.build(None)
        self.output_bias = self.add_weight(name="output_bias", shape=(self.vocab_size,),
                                           initializer="zeros", autocast=False)
        self.built = True

    def call(self, masked_states, training=False):
        """[B, P, H] hidden states at the masked positions
        (`bert_tf.model.layers.gather_positions`)."""
        num_positions = masked_states.shape[1] or tf.shape(masked_states)[1]
        x = self.transform(tf.reshape(masked_states, [-1, self.hidden_size]))
        table = tf.cast(self.embedding_table(), x.dtype)
        logits = tf.cast(tf.matmul(x, table, transpose_b=True), tf.float32)
        if training and cpu_kernels_enabled():
            log_probs = log_softmax_with_bias(logits, tf.convert_to_tensor(self.output_bias))
        else:
            log_probs = tf.nn.log_softmax(tf.nn.bias_add(logits, self.output_bias), axis=-1)
        return tf.reshape(log_probs, [-1, num_positions, self.vocab_size])

    def get_config(self):
        config = super().get_config()
        config.update(vocab_size=self.vocab_size, hidden_size=self.hidden_size,
                      hidden_act=self.hidden_act, initializer_range=self.initializer_range)
        return config


class _TwoOutputHead(keras.layers.Layer):
    """A head with two outputs per hidden state: `projection`, [2, hidden] output weights and
    [2] output bias."""

    def __init__(self, hidden_size, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.initializer_range = initializer_range
        self.projection = OutputProjection(2, hidden_size, initializer_range, name="projection",
                                           dtype=self.dtype_policy)

    def build(self, input_shape=None):
        self.projection.build(None)
        self.built = True

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, initializer_range=self.initializer_range)
        return config


class NextSentenceHead(_TwoOutputHead):
    """Next-sentence log-probs [B, 2] (float32) from the pooled output; 0 = "is next"."""

    def call(self, pooled_output):
        return tf.nn.log_softmax(self.projection(pooled_output), axis=-1)


class ClassificationHead(keras.layers.Layer):
    """Logits [B, num_labels] (float32) from the pooled output, after dropout (run_classifier).

    The original initialises these weights with stddev 0.02 whatever the config says.
    """

    def __init__(self, num_labels, hidden_size, dropout_rate=0.1, initializer_range=0.02,
                 **kwargs):
        super().__init__(**kwargs)
        self.num_labels = num_labels
        self.hidden_size = hidden_size
        self.dropout_rate = dropout_rate
        self.initializer_range = initializer_range
        self.dropout = Dropout(dropout_rate, dtype=self.dtype_policy)
        self.projection = OutputProjection(num_labels, hidden_size, initializer_range,
                                           name="projection", dtype=self.dtype_policy)

    def build(self, input_shape=None):
        self.projection.build(None)
        self.built = True

    def call(self, pooled_output, training=False):
        return self.projection(self.dropout(pooled_output, training=training))

    def get_config(self):
        config = super().get_config()
        config.update(num_labels=self.num_labels, hidden_size=self.hidden_size,
                      dropout_rate=self.dropout_rate, initializer_range=self.initializer_range)
        return config


class SpanHead(_TwoOutputHead):
    """Start and end logits [B, T] each (float32) from the sequence output (run_squad)."""

    def call(self, sequence_output):
        seq_length = sequence_output.shape[1] or tf.shape(sequence_output)[1]
        logits = self.projection(tf.reshape(sequence_output, [-1, self.hidden_size]))
        logits = tf.reshape(logits, [-1, seq_length, 2])
        return logits[:, :, 0], logits[:, :, 1]


class TokenClassificationHead(ClassificationHead):
    """Per-token logits [B, T, num_labels] (float32), after dropout (tagging, e.g. NER)."""

    def call(self, sequence_output, training=False):
        seq_length = sequence_output.shape[1] or tf.shape(sequence_output)[1]
        x = self.dropout(tf.reshape(sequence_output, [-1, self.hidden_size]), training=training)
        return tf.reshape(self.projection(x), [-1, seq_length, self.num_labels])
