"""SavedModels that serve a task on token ids and on raw strings.

A SavedModel written here has:
- `serving_default`: the task's signature on token ids (`input_ids`, `input_mask`,
  `segment_ids`: int32 [batch, length]; `Task.serving_signatures`);
- `serve_text` (`text`: string [batch]) and `serve_text_pair` (`text_a`, `text_b`): the same
  outputs from raw strings, tokenized and packed in the graph as the original's
  convert_single_example (`bert_tf.graph_tokenization.GraphTokenizer.bert_inputs`: `[CLS] a
  [SEP] (b [SEP])`, truncated as `_truncate_seq_pair`, zero-padded to max_seq_length; an empty
  string is `[CLS] [SEP]`, a long one is cut, as the original does);
- `assets/vocab.txt` (the tokenizer's table reads it: no absolute path is kept) and
  `assets/bert_config.json`.

Which outputs: the task's `text_serving_outputs` (classifier: probabilities, logits and the
label name of each row when the labels are known; encoder: sequence and pooled outputs).
Tagging (NER): `serve_text` returns `words`, `tags` (the tag of each word's first piece) and
`num_words` instead (`_ner_serve_text`).
"""
import json
import os

import tensorflow as tf

from bert_tf.task import Task


class EncoderTask(Task):
    """The encoder alone, for export: sequence_output [B, T, H] and pooled_output [B, H]."""

    name = "encoder"

    def __init__(self, bert_config):
        self.bert_config = bert_config

    def build_model(self):
        from bert_tf.encoder import BertEncoder
        return BertEncoder(self.bert_config)

    def serving_outputs(self, outputs):
        return {name: tf.cast(outputs[name], tf.float32)
                for name in ("sequence_output", "pooled_output")}


def pack_single(tokenizer, ids, max_seq_length):
    """[B, (pieces)] ids -> the model's inputs for `[CLS] ids [SEP]` (cut to max_seq_length - 2
    pieces, zero-padded), as GraphTokenizer.bert_inputs packs a single text."""
    batch = ids.nrows()
    ids = tf.concat([tf.fill([batch, 1], tokenizer.cls_id), ids[:, :max_seq_length - 2],
                     tf.fill([batch, 1], tokenizer.sep_id)], axis=1)
    shape = [None, max_seq_length]
    return {"input_ids": ids.to_tensor(0, shape=shape),
            "input_mask": tf.ones_like(ids).to_tensor(0, shape=shape),
            "segment_ids": tf.zeros_like(ids).to_tensor(0, shape=shape)}


def _ner_serve_text(task, model, tokenizer, max_seq_length):
    """`serve_text` of a TaggingTask: one tag per whitespace word, the prediction at the word's
    first piece (run_ner's recipe: each word tokenized alone, a word without pieces is [UNK]).
    Words whose first piece falls beyond max_seq_length - 2 pieces are dropped (one window)."""

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def serve_text(text):
        words, pieces = tokenizer.word_pieces(text)
        per_word = pieces.values  # [W, (pieces)]
        lengths = per_word.row_lengths()
        unk = tf.fill([per_word.nrows(), 1], tokenizer.unk_id)
        per_word = tf.ragged.boolean_mask(  # a word without pieces is one [UNK]
            tf.concat([per_word, unk], axis=1),
            tf.ragged.range(lengths + 1) < tf.expand_dims(tf.maximum(lengths, 1), 1))
        ids = pieces.with_values(per_word).merge_dims(1, 2)  # [B, (pieces)]
        row = words.value_rowids()
        start = (tf.cumsum(per_word.row_lengths(), exclusive=True)
                 - tf.gather(ids.row_splits, row))  # each word's first piece in its text
        keep = start < max_seq_length - 2
        inputs = pack_single(tokenizer, ids, max_seq_length)
        outputs = task.outputs(model, inputs, training=False)
        tag_ids = tf.argmax(outputs["logits"], axis=-1, output_type=tf.int32)  # [B, T]
        position = tf.minimum(start + 1, max_seq_length - 1)
        word_tags = tf.gather(tf.constant(task.label_list),
                              tf.gather_nd(tag_ids, tf.stack([row, position], axis=1)))
        kept_words = tf.ragged.boolean_mask(words, words.with_flat_values(keep))
        tags = tf.ragged.boolean_mask(words.with_flat_values(word_tags),
                                      words.with_flat_values(keep))
        return {"words": kept_words.to_tensor(""), "tags": tags.to_tensor(""),
                "num_words": tf.cast(kept_words.row_lengths(), tf.int32)}

    return serve_text


def text_signatures(task, model, tokenizer, max_seq_length):
    """{"serve_text", "serve_text_pair"}: tf.functions on [B] strings."""
    text = tf.TensorSpec([None], tf.string)

    def serve(inputs):
        outputs = task.outputs(model, inputs, training=False)
        return task.text_serving_outputs(outputs)

    @tf.function(input_signature=[text])
    def serve_text(text):
        return serve(tokenizer.bert_inputs(text, max_seq_length=max_seq_length))

    @tf.function(input_signature=[text, text])
    def serve_text_pair(text_a, text_b):
        return serve(tokenizer.bert_inputs(text_a, text_b, max_seq_length=max_seq_length))

    signatures = {"serve_text": serve_text, "serve_text_pair": serve_text_pair}
    if task.name == "tagging":
        signatures["serve_text"] = _ner_serve_text(task, model, tokenizer, max_seq_length)
    return signatures


def save(task, model, export_dir, vocab_file=None, do_lower_case=True, max_seq_length=128,
         log=print):
    """Writes the SavedModel (see the module docstring) to export_dir, under a temporary name
    renamed when complete. Without `vocab_file`, only the token-id signature is saved."""
    import shutil

    from bert_tf.io_utils import remove_stale_temporaries, temporary_path

    remove_stale_temporaries(export_dir)
    tmp = temporary_path(export_dir.rstrip("/"))
    signatures = dict(task.serving_signatures(model))
    module = tf.Module()
    # The variables only: a Keras model attached here would add Keras' own default signature.
    module.model_variables = [v.value for v in model.variables]
    if vocab_file:
        from bert_tf.graph_tokenization import GraphTokenizer
        module.tokenizer = GraphTokenizer(vocab_file, do_lower_case=do_lower_case)
        signatures.update(text_signatures(task, model, module.tokenizer, max_seq_length))
    tf.saved_model.save(module, tmp, signatures=signatures)
    config = getattr(model, "config", None)
    if config is not None:
        tf.io.gfile.makedirs(os.path.join(tmp, "assets"))
        with tf.io.gfile.GFile(os.path.join(tmp, "assets", "bert_config.json"), "w") as f:
            f.write(json.dumps(config.to_dict(), indent=2, sort_keys=True) + "\n")
    if tf.io.gfile.exists(export_dir):
        shutil.rmtree(export_dir)
    tf.io.gfile.rename(tmp, export_dir)
    log(f"exported {export_dir} (signatures: {', '.join(signatures)})")
    return export_dir
