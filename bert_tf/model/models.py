"""Task models: BertEncoder + heads, each a keras.Model called on a dict of int32 [B, T] tensors.

Every model has `.encoder` (a BertEncoder named "bert"), so weights move between task models
(pretrainer -> classifier) through `bert_tf.model.checkpoints.load_checkpoint`, and returns a dict
holding its head outputs (float32) plus the encoder outputs.

    BertPretrainer(config)                 + "masked_lm_positions" [B, P]
        -> masked_lm_log_probs [B, P, V], next_sentence_log_probs [B, 2] (none with
           next_sentence=False)
    BertClassifier(config, num_labels)     -> logits [B, num_labels] (num_labels=1: regression)
    BertMultipleChoice(config)             inputs [B, N, T] -> logits [B, N]
    BertSpanLabeler(config)                -> start_logits [B, T], end_logits [B, T]
    BertTokenClassifier(config, num_labels) -> logits [B, T, num_labels]
    BertFeatureTagger(config, num_labels, features) -> logits [B, T, num_labels], from a frozen
        encoder's layers under a two-layer BiLSTM (the paper's feature-based approach)
"""
import keras
import tensorflow as tf

from bert_tf.model import variable_names
from bert_tf.model.config import BertConfig, SerializesBertConfig
from bert_tf.model.encoder import BertEncoder
from bert_tf.model.heads import (ClassificationHead, MaskedLMHead, NextSentenceHead, SpanHead,
                           TokenClassificationHead)
from bert_tf.model.layers import gather_positions


class _TaskModel(SerializesBertConfig, keras.Model):
    """Shared plumbing: config handling and the encoder. `reads_pooled_output`: whether the
    model's outputs depend on the encoder's pooler (a checkpoint without one, such as Hugging
    Face's task models on the sequence output, is then complete:
    bert_tf.model.load_report.require_complete)."""

    reads_pooled_output = True

    def __init__(self, config, **kwargs):
        super().__init__(**kwargs)
        if isinstance(config, dict):
            config = BertConfig.from_dict(config)
        self.config = config
        self.encoder = BertEncoder(config, name="bert", dtype=self.dtype_policy)

    def original_variable_parts(self):
        """This model's variables under the original release's names
        (bert_tf.model.variable_names)."""
        return variable_names.encoder_parts(self.encoder) + self.head_variable_parts()

    def head_variable_parts(self):
        raise NotImplementedError

    def _finish_build(self, *heads):
        for head in heads:
            head.build(None)
        self.built = True


class BertPretrainer(_TaskModel):
    """Encoder + masked-LM head (cls/predictions) + next-sentence head (cls/seq_relationship).

    `next_sentence=False`: masked-LM only (no cls/seq_relationship variables, no
    "next_sentence_log_probs"; the pooler is not trained). Packed rows ("position_ids",
    "sequence_ids", and with the next-sentence head "next_sentence_positions" [B, S]: each
    sequence's [CLS]) give "pooled_output" [B, S, H] and "next_sentence_log_probs" [B, S, 2].
    """

    def __init__(self, config, next_sentence=True, name="bert_pretrainer", **kwargs):
        super().__init__(config, name=name, **kwargs)
        c = self.config
        self.has_next_sentence = bool(next_sentence)
        self.masked_lm = MaskedLMHead(c.vocab_size, c.hidden_size, c.hidden_act,
                                      c.initializer_range,
                                      embedding_table=lambda: self.encoder.word_embeddings,
                                      name="predictions", dtype=self.dtype_policy)
        if self.has_next_sentence:
            self.next_sentence = NextSentenceHead(c.hidden_size, c.initializer_range,
                                                  name="seq_relationship",
                                                  dtype=self.dtype_policy)
            self._finish_build(self.masked_lm, self.next_sentence)
        else:
            self.next_sentence = None
            self.reads_pooled_output = False
            # No loss reads the pooler: left as initialised (or loaded), not decayed to zero
            # by the optimizer's weight decay.
            self.encoder.pooler.trainable = False
            self._finish_build(self.masked_lm)

    def head_variable_parts(self):
        return variable_names.pretraining_head_parts(self.masked_lm, self.next_sentence)

    def call(self, inputs, training=False, return_encoder_outputs=True):
        """`return_encoder_outputs=False` returns the heads' outputs and the pooled output only,
        and then skips the last layer's work at positions the heads do not read (see
        BertEncoder.call)."""
        positions = inputs["masked_lm_positions"]
        cls_positions = inputs.get("next_sentence_positions")
        if return_encoder_outputs:
            outputs = dict(self.encoder(inputs, training=training, cls_positions=cls_positions))
            masked_states = gather_positions(outputs["sequence_output"], positions)
        else:
            outputs = dict(self.encoder(inputs, training=training, output_positions=positions,
                                        cls_positions=cls_positions))
            masked_states = outputs.pop("positions_output")
        outputs["masked_lm_log_probs"] = self.masked_lm(masked_states, training=training)
        if self.has_next_sentence:
            outputs["next_sentence_log_probs"] = self.next_sentence(outputs["pooled_output"])
        return outputs

    def get_config(self):
        config = super().get_config()
        if not self.has_next_sentence:
            config.update(next_sentence=False)
        return config


class _LabelModel(_TaskModel):
    """Encoder + `num_labels` logits through dropout and a projection (`head_type`: on the
    pooled output or per token), under run_classifier's names output_weights, output_bias."""

    head_type = ClassificationHead

    def __init__(self, config, num_labels, dropout_rate=0.1, **kwargs):
        super().__init__(config, **kwargs)
        self.num_labels = num_labels
        self.dropout_rate = dropout_rate
        self.classifier = self.head_type(num_labels, self.config.hidden_size, dropout_rate, 0.02,
                                         name="classifier", dtype=self.dtype_policy)
        self._finish_build(self.classifier)

    def head_variable_parts(self):
        """run_classifier's names: output_weights, output_bias (no scope)."""
        return variable_names.projection_parts("", self.classifier.projection)

    def get_config(self):
        config = super().get_config()
        config.update(num_labels=self.num_labels, dropout_rate=self.dropout_rate)
        return config


class BertClassifier(_LabelModel):
    """Encoder + sentence classification/regression head (run_classifier's output_weights/bias).

    Args:
      num_labels: number of classes (1 for regression).
      dropout_rate: dropout on the pooled output in training (the original: 0.1).
    """

    def __init__(self, config, num_labels, dropout_rate=0.1, name="bert_classifier", **kwargs):
        super().__init__(config, num_labels, dropout_rate, name=name, **kwargs)

    def call(self, inputs, training=False, return_encoder_outputs=True):
        """`return_encoder_outputs=False` returns "logits" and "pooled_output" only, and then
        computes the last layer at [CLS] alone (the only position the head reads; MiniLM, 6
        layers: about 1/7 fewer FLOPs per step)."""
        if return_encoder_outputs:
            outputs = dict(self.encoder(inputs, training=training))
        else:
            no_positions = tf.zeros_like(inputs["input_ids"][:, :0])
            outputs = dict(self.encoder(inputs, training=training, output_positions=no_positions))
            outputs.pop("positions_output")
        outputs["logits"] = self.classifier(outputs["pooled_output"], training=training)
        return outputs


class BertMultipleChoice(BertClassifier):
    """Encoder + one score per choice: the paper's SWAG model, transformers'
    BertForMultipleChoice. Inputs are [B, N, T] (N packed `[CLS] context [SEP] ending [SEP]`
    sequences per question); each of the B*N sequences goes through the encoder, its pooled
    output (dropout in training) through one vector, `output_weights` [1, hidden] and
    `output_bias` [1]: run_classifier's head names with one output, which is where a Hugging
    Face checkpoint's `classifier.weight` / `classifier.bias` of that architecture load. The
    scores make "logits" [B, N], softmaxed over the N choices by the task.

    The encoder's outputs come back per choice: "pooled_output" [B, N, H] (and with
    `return_encoder_outputs`, "sequence_output" and each of "encoder_outputs" [B, N, T, H]).
    """

    def __init__(self, config, dropout_rate=0.1, name="bert_multiple_choice", **kwargs):
        super().__init__(config, 1, dropout_rate, name=name, **kwargs)

    def call(self, inputs, training=False, return_encoder_outputs=True):
        input_ids = inputs["input_ids"]
        # Static sizes where known (TPU, XLA), else the batch's.
        choices = input_ids.shape[1] or tf.shape(input_ids)[1]
        length = input_ids.shape[2] or tf.shape(input_ids)[2]
        flat = {name: tf.reshape(inputs[name], [-1, length]) for name in inputs}
        outputs = super().call(flat, training=training,
                               return_encoder_outputs=return_encoder_outputs)

        def per_choice(x):
            return tf.reshape(x, tf.concat([[-1, choices], tf.shape(x)[1:]], axis=0))

        result = {name: tf.nest.map_structure(per_choice, value)
                  for name, value in outputs.items() if name != "logits"}
        result["logits"] = tf.reshape(outputs["logits"], [-1, choices])
        return result

    def get_config(self):
        config = super().get_config()
        del config["num_labels"]  # always 1
        return config


class BertSpanLabeler(_TaskModel):
    """Encoder + SQuAD span head (cls/squad/output_weights, output_bias)."""

    reads_pooled_output = False

    def __init__(self, config, name="bert_span_labeler", **kwargs):
        super().__init__(config, name=name, **kwargs)
        self.span = SpanHead(self.config.hidden_size, 0.02, name="squad", dtype=self.dtype_policy)
        self._finish_build(self.span)

    def head_variable_parts(self):
        return variable_names.projection_parts("cls/squad/", self.span.projection)

    def call(self, inputs, training=False):
        outputs = dict(self.encoder(inputs, training=training))
        outputs["start_logits"], outputs["end_logits"] = self.span(outputs["sequence_output"])
        return outputs


class BertTokenClassifier(_LabelModel):
    """Encoder + per-token classification head (output_weights/output_bias), e.g. for NER."""

    reads_pooled_output = False
    head_type = TokenClassificationHead

    def __init__(self, config, num_labels, dropout_rate=0.1, name="bert_token_classifier",
                 **kwargs):
        super().__init__(config, num_labels, dropout_rate, name=name, **kwargs)

    def call(self, inputs, training=False):
        outputs = dict(self.encoder(inputs, training=training))
        outputs["logits"] = self.classifier(outputs["sequence_output"], training=training)
        return outputs


# The paper's section 5.3 (Table 7): which of a frozen encoder's layers feed the tagger. "sum"
# and "concat" of the last four hidden layers, the last, the second to last, the embeddings,
# and the sum of every hidden layer.
FEATURE_LAYERS = ("last", "second_to_last", "embeddings", "sum_last_four", "concat_last_four",
                  "sum_all")


def combine_layers(outputs, feature_layers):
    """The [B, T, F] features `feature_layers` (FEATURE_LAYERS) of the encoder's `outputs`."""
    hidden = outputs["encoder_outputs"]
    if feature_layers == "last":
        return hidden[-1]
    if feature_layers == "second_to_last":
        return hidden[-2]
    if feature_layers == "embeddings":
        return outputs["embedding_output"]
    if feature_layers == "sum_last_four":
        return tf.add_n(hidden[-4:])
    if feature_layers == "concat_last_four":
        return tf.concat(hidden[-4:], axis=-1)
    if feature_layers == "sum_all":
        return tf.add_n(hidden)
    raise ValueError(f"unknown feature_layers {feature_layers!r} (one of "
                     f"{', '.join(FEATURE_LAYERS)})")


def feature_size(config, feature_layers):
    """The size of a token's features: the hidden size, four times it concatenated."""
    layers = min(4, config.num_hidden_layers) if feature_layers == "concat_last_four" else 1
    return layers * config.hidden_size


class BertFeatureTagger(_TaskModel):
    """The paper's feature-based NER (section 5.3): the encoder frozen (not trainable, run
    without dropout), `feature_layers` (FEATURE_LAYERS) of its layers through a two-layer
    bidirectional LSTM of `lstm_units` per direction (default the hidden size: the paper's 768
    for BERT-Base), then dropout and run_classifier's per-token projection (output_weights,
    output_bias)."""

    reads_pooled_output = False

    def __init__(self, config, num_labels, feature_layers="concat_last_four", lstm_units=None,
                 dropout_rate=0.1, name="bert_feature_tagger", **kwargs):
        super().__init__(config, name=name, **kwargs)
        if feature_layers not in FEATURE_LAYERS:
            raise ValueError(f"unknown feature_layers {feature_layers!r} (one of "
                             f"{', '.join(FEATURE_LAYERS)})")
        self.num_labels, self.feature_layers = num_labels, feature_layers
        self.dropout_rate = dropout_rate
        self.lstm_units = lstm_units or self.config.hidden_size
        self.encoder.trainable = False
        # Attributes, not a list: TensorFlow's checkpoints follow a model's attributes.
        self.bilstm_0, self.bilstm_1 = (keras.layers.Bidirectional(
            keras.layers.LSTM(self.lstm_units, return_sequences=True), name=f"bilstm_{i}")
            for i in range(2))
        size = feature_size(self.config, feature_layers)
        for i, lstm in enumerate(self.lstm):
            lstm.build((None, None, size if i == 0 else 2 * self.lstm_units))
        self.classifier = TokenClassificationHead(num_labels, 2 * self.lstm_units, dropout_rate,
                                                  0.02, name="classifier",
                                                  dtype=self.dtype_policy)
        self._finish_build(self.classifier)

    @property
    def lstm(self):
        return [self.bilstm_0, self.bilstm_1]

    def head_variable_parts(self):
        """The LSTM's variables as bilstm_<i>/<forward|backward>/<kernel|recurrent_kernel|bias>
        (names of ours: the original has no such head), the projection as run_classifier's."""
        parts = []
        for i, lstm in enumerate(self.lstm):
            for direction, layer in (("forward", lstm.forward_layer),
                                     ("backward", lstm.backward_layer)):
                cell = layer.cell
                parts += [variable_names.Part(f"bilstm_{i}/{direction}/{name}", variable)
                          for name, variable in (("kernel", cell.kernel),
                                                 ("recurrent_kernel", cell.recurrent_kernel),
                                                 ("bias", cell.bias))]
        return parts + variable_names.projection_parts("", self.classifier.projection)

    def call(self, inputs, training=False):
        outputs = dict(self.encoder(inputs, training=False))
        x = combine_layers(outputs, self.feature_layers)
        mask = tf.cast(inputs["input_mask"], tf.bool) if "input_mask" in inputs else None
        for lstm in self.lstm:
            x = lstm(x, mask=mask, training=training)
        # The LSTM attaches its mask to its output; the head (per token) does not read it.
        outputs["logits"] = self.classifier(tf.identity(x), training=training)
        return outputs

    def get_config(self):
        config = super().get_config()
        config.update(num_labels=self.num_labels, feature_layers=self.feature_layers,
                      lstm_units=self.lstm_units, dropout_rate=self.dropout_rate)
        return config
