"""The TF Hub text contract: a preprocessor SavedModel and an encoder SavedModel.

What TF Hub's BERT models and Model Garden's `export_tfhub` (official/nlp/tools) publish, the
"text embeddings with Transformer encoders" API of TF Hub's common SavedModel APIs for text:

preprocessor (no variables; strings to the encoder's inputs):
  preprocessor(text)                       [B] tf.string -> {"input_word_ids", "input_mask",
                                           "input_type_ids"}: int32 [B, seq_length], one
                                           segment, seq_length = the export's max_seq_length;
  preprocessor.tokenize(text)              [B] tf.string -> int32 RaggedTensor [B, (tokens),
                                           (pieces)]: each BasicTokenizer token's word pieces
                                           (`GraphTokenizer.token_pieces`);
  preprocessor.tokenize.get_special_tokens_dict()
                                           {"vocab_size", "start_of_sequence_id",
                                           "end_of_segment_id", "padding_id", "mask_id"}: int32
                                           scalars (a token the vocabulary lacks is left out);
  preprocessor.bert_pack_inputs(segments, seq_length=...)
                                           a list of 1 or 2 int32 RaggedTensors [B, (pieces)] or
                                           [B, (tokens), (pieces)] -> the three inputs, int32
                                           [B, seq_length]; seq_length is a call-time argument
                                           (a Python int or an int32 scalar; default: the
                                           export's max_seq_length).
encoder (trainable; the encoder inputs to its outputs):
  encoder(inputs, training=False)          {"input_word_ids", "input_mask", "input_type_ids"}:
                                           int32 [B, T] -> {"pooled_output": [B, H],
                                           "sequence_output": [B, T, H], "encoder_outputs": a list
                                           of every layer's [B, T, H], "default": pooled_output},
                                           float32; training=True: dropout on;
  encoder.variables, .trainable_variables, .regularization_losses (the Reusable SavedModel
  API: `hub.KerasLayer(encoder, trainable=True)` fine-tunes them), encoder.vocab_file (an asset)
  and encoder.do_lower_case (Model Garden's escape hatch to the vocabulary), and a
  `serving_default` signature with the outputs flattened (`encoder_outputs_<i>`) for TensorFlow
  Serving and `saved_model_cli`.

Packing is `bert_tf.text.packing.pack`, the original's: a single text is cut to seq_length - 2
pieces, a pair as `_truncate_seq_pair` (pop from the longer part, the second on ties), a second
part without pieces packs as a single text. TF Hub's preprocessors (tensorflow-text's
RoundRobinTrimmer and combine_segments) give the same ids for one or two segments that both
have pieces (round robin hands the budget out one piece at a time, which leaves the parts where
popping from the longer leaves them); they differ on an empty second segment, which they pack as
`[CLS] a [SEP] [SEP]`. Three or more segments: TF Hub's round-robin trimmer refuses them too
(Model Garden traces 1 or 2); the loaded function says it has no concrete function for them.

Everything is core TensorFlow ops: the SavedModels load without tensorflow-text, and without
Keras (tf.Module-like objects and tf.functions; `hub.KerasLayer` wraps them in tf-keras).
"""
import os

import tensorflow as tf

from bert_tf.errors import argument_error
from bert_tf.io_utils import atomic_output
from bert_tf.serving.export_folders import TFHUB_PARTS, check_export_dir, write_marker
from bert_tf.text.graph_tokenization import GraphTokenizer

PREPROCESSOR, ENCODER = TFHUB_PARTS
# The TF Hub names of the encoder inputs, and ours (bert_tf.text.packing.INPUT_NAMES).
HUB_INPUTS = {"input_word_ids": "input_ids", "input_mask": "input_mask",
              "input_type_ids": "segment_ids"}
_SPECIAL_TOKENS = {"start_of_sequence_id": "[CLS]", "end_of_segment_id": "[SEP]",
                   "padding_id": "[PAD]", "mask_id": "[MASK]"}


def hub_inputs(packed):
    """Our packing's dict (input_ids, input_mask, segment_ids) under TF Hub's names."""
    return {hub: packed[ours] for hub, ours in HUB_INPUTS.items()}


def _callable(function, **attributes):
    """A trackable object whose `__call__` is `function` (a restored one is callable, as TF Hub
    models' `preprocessor.tokenize`), with `attributes`."""
    holder = tf.train.Checkpoint()
    holder.__call__ = function
    for name, value in attributes.items():
        setattr(holder, name, value)
    return holder


def preprocessor_module(tokenizer, seq_length):
    """The preprocessor object (see the module docstring) over a GraphTokenizer."""
    text = tf.TensorSpec([None], tf.string)

    def pack(segments, seq_length):
        if not isinstance(segments, (list, tuple)):
            segments = [segments]
        if not 1 <= len(segments) <= 2:
            raise ValueError(f"bert_pack_inputs packs 1 or 2 segments, got {len(segments)}")
        segments = [s.merge_dims(1, s.ragged_rank) if s.ragged_rank > 1 else s
                    for s in segments]
        return hub_inputs(tokenizer.pack(*segments, max_seq_length=seq_length))

    @tf.function(input_signature=[text], autograph=False)
    def preprocess(texts):
        return pack([tokenizer.token_pieces(texts)], seq_length)

    @tf.function(input_signature=[text], autograph=False)
    def tokenize(texts):
        return tokenizer.token_pieces(texts)

    vocab = {token: i for i, token in enumerate(tokenizer.id_to_token(
        tf.range(tokenizer.vocab_size)).numpy())}
    special = {"vocab_size": tokenizer.vocab_size}
    special.update({name: vocab[token.encode()] for name, token in _SPECIAL_TOKENS.items()
                    if token.encode() in vocab})

    @tf.function(input_signature=[], autograph=False)
    def get_special_tokens_dict():
        return {name: tf.constant(value, tf.int32) for name, value in special.items()}

    @tf.function(autograph=False)
    def bert_pack_inputs(inputs, seq_length=seq_length):
        return pack(inputs, seq_length)

    # The traces a SavedModel keeps: 1 or 2 segments, each [B, (pieces)] or [B, (tokens),
    # (pieces)], seq_length an int32 scalar (a Python int is converted to it at call time).
    for ragged_rank in (1, 2):
        for num_segments in (1, 2):
            bert_pack_inputs.get_concrete_function(
                [tf.RaggedTensorSpec([None] * (ragged_rank + 1), tf.int32)] * num_segments,
                seq_length=tf.TensorSpec([], tf.int32))
    module = _callable(preprocess)
    module.tokenizer = tokenizer  # the vocabulary table and its asset
    module.tokenize = _callable(tokenize, get_special_tokens_dict=_callable(
        get_special_tokens_dict))
    module.bert_pack_inputs = _callable(bert_pack_inputs)
    return module


def encoder_module(encoder, vocab_file=None, do_lower_case=True):
    """The encoder object (see the module docstring) over a BertEncoder (Keras 3): its
    tf.Variables, trainable ones marked so, and `__call__` traced for training False and True."""
    spec = tf.TensorSpec([None, None], tf.int32)
    specs = {name: spec for name in HUB_INPUTS}

    def outputs_of(inputs, training):
        outputs = encoder({ours: inputs[hub] for hub, ours in HUB_INPUTS.items()},
                          training=training)
        pooled = tf.cast(outputs["pooled_output"], tf.float32)
        return {"pooled_output": pooled, "default": pooled,
                "sequence_output": tf.cast(outputs["sequence_output"], tf.float32),
                "encoder_outputs": [tf.cast(x, tf.float32) for x in outputs["encoder_outputs"]]}

    @tf.function(autograph=False)
    def call(inputs, training=False):
        return outputs_of(inputs, training)

    for training in (False, True):
        call.get_concrete_function(specs, training=training)

    @tf.function(input_signature=[spec] * 3, autograph=False)
    def serve(input_word_ids, input_mask, input_type_ids):
        outputs = outputs_of({"input_word_ids": input_word_ids, "input_mask": input_mask,
                              "input_type_ids": input_type_ids}, False)
        layers = outputs.pop("encoder_outputs")
        outputs.update({f"encoder_outputs_{i}": x for i, x in enumerate(layers)})
        return outputs

    module = _callable(call)
    module.variables = [v.value for v in encoder.variables]
    module.trainable_variables = [v.value for v in encoder.trainable_variables]
    module.regularization_losses = []
    if vocab_file:
        module.vocab_file = tf.saved_model.Asset(vocab_file)
        module.do_lower_case = tf.Variable(do_lower_case, trainable=False)
    return module, {"serving_default": serve}


def save(task, model, export_dir, vocab_file, do_lower_case=True, log=print):
    """Writes export_dir/preprocessor and export_dir/encoder (see the module docstring) for an
    EncoderTask's BertEncoder, under a temporary name renamed when both are complete.

    Model Garden's export_tfhub writes one of the two per run (--export_type=preprocessing or
    model, each to its --export_path); here one run writes both, side by side, with the same
    vocabulary and the task's max_seq_length as the preprocessor's default seq_length.
    `export_dir` must be new, empty or an earlier export (`check_export_dir`): nothing else is
    replaced."""
    check_export_dir(export_dir)
    if task.name != "encoder":
        raise argument_error("task", f"the TF Hub format exports the encoder (task encoder), "
                                     f"not {task.name}")
    if not vocab_file:
        raise argument_error("vocab_file", "the TF Hub preprocessor needs the vocabulary")
    seq_length = task.config.max_seq_length
    preprocessor = preprocessor_module(GraphTokenizer(vocab_file, do_lower_case=do_lower_case),
                                       seq_length)
    encoder, signatures = encoder_module(model, vocab_file, do_lower_case)
    description = {"task": task.name, "format": "tfhub", "max_seq_length": seq_length}
    with atomic_output(export_dir) as tmp:
        tf.saved_model.save(preprocessor, os.path.join(tmp, PREPROCESSOR))
        tf.saved_model.save(encoder, os.path.join(tmp, ENCODER), signatures=signatures)
        for part in (PREPROCESSOR, ENCODER):
            assets = os.path.join(tmp, part, "assets")
            tf.io.gfile.makedirs(assets)
            if task.config.bert_config is not None:
                with tf.io.gfile.GFile(os.path.join(assets, "bert_config.json"), "w") as f:
                    f.write(task.config.bert_config.to_json_string())
            write_marker(os.path.join(tmp, part), dict(description, part=part))
    log(f"exported {export_dir}: {PREPROCESSOR} (tokenize, bert_pack_inputs, default "
        f"seq_length {seq_length}) and {ENCODER} ({len(encoder.trainable_variables)} trainable "
        f"variables)")
    return export_dir
