"""SavedModels that serve a task on token ids and on raw strings.

A SavedModel written here has:
- `serving_default`: the task's signature on token ids (`input_ids`, `input_mask`,
  `segment_ids`: int32 [batch, length]; `Task.serving_signatures`);
- `serve_text` (`text`: string [batch]) and `serve_text_pair` (`text_a`, `text_b`): the same
  outputs from raw strings, tokenized and packed in the graph as the original's
  convert_single_example (`bert_tf.graph_tokenization.GraphTokenizer.bert_inputs`: `[CLS] a
  [SEP] (b [SEP])`, truncated as `_truncate_seq_pair`, zero-padded to max_seq_length; an empty
  string is `[CLS] [SEP]`, a long one is cut, as the original does);
- `assets/vocab.txt` (the tokenizer's table reads it: no absolute path is kept),
  `assets/bert_config.json`, and `assets/bert_tf_export.json` (what was exported: task,
  signatures, max_seq_length), by which a later export recognises a folder it may replace
  (`check_export_dir`).

Which outputs: the task's `text_serving_outputs` (classifier: probabilities, logits and the
label name of each row when the labels are known; encoder: sequence and pooled outputs).
Tagging (NER): `serve_text` returns `words`, `tags` (the tag of each word's first piece) and
`num_words` instead (`_ner_serve_text`).
SQuAD: `serve_text_pair` (question, context) returns the best span's `answer` (de-tokenized
WordPiece text), `score`, `start_logit` and `end_logit` (`_squad_serve_text_pair`).
Masked LM (`MaskedLMTask`): `serve_text` only, on texts where the literal "[MASK]" is the mask
token; at each mask, the `top_k` `tokens`, `token_ids` and `probabilities`
(`_masked_lm_serve_text`).
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


class MaskedLMTask(Task):
    """The pretrained model's masked-LM head, for export: at every `[MASK]` of the input (id
    `mask_id`), the `top_k` most probable tokens. Outputs (padded to the batch's most masks):
    `token_ids` int32 and `probabilities` float32 [B, masks, top_k], `positions` int32 and
    `mask` int32 (1: a real [MASK]) [B, masks]; padding entries are 0."""

    name = "pretraining"

    def __init__(self, bert_config, mask_id, top_k=5):
        self.bert_config = bert_config
        self.mask_id = mask_id
        self.top_k = top_k

    def build_model(self):
        from bert_tf.models import BertPretrainer
        return BertPretrainer(self.bert_config)

    def outputs(self, model, batch, training):
        ids = batch["input_ids"]
        where = tf.where(tf.equal(ids, self.mask_id) & tf.not_equal(batch["input_mask"], 0))
        found = tf.RaggedTensor.from_value_rowids(
            tf.cast(where[:, 1], tf.int32), where[:, 0], nrows=tf.shape(ids, tf.int64)[0])
        positions = found.to_tensor(0)
        inputs = dict(self.model_inputs(batch), masked_lm_positions=positions)
        outputs = dict(model(inputs, training=training))
        outputs["masked_lm_positions"] = positions
        outputs["masked_lm_mask"] = tf.ones_like(found).to_tensor(0)
        return outputs

    def serving_outputs(self, outputs):
        mask = outputs["masked_lm_mask"]
        probabilities = tf.exp(tf.cast(outputs["masked_lm_log_probs"], tf.float32))
        top = tf.math.top_k(probabilities, min(self.top_k, self.bert_config.vocab_size))
        real = tf.cast(mask, tf.bool)[:, :, None]
        return {"token_ids": tf.where(real, top.indices, 0),
                "probabilities": tf.where(real, top.values, 0.0),
                "positions": outputs["masked_lm_positions"], "mask": mask}


def _masked_lm_serve_text(task, model, tokenizer, max_seq_length):
    """`serve_text` of a MaskedLMTask: the literal "[MASK]" (upper case, as is) in a text is the
    [MASK] token; the parts around it are tokenized as usual (the original's BasicTokenizer
    would split "[MASK]" into "[", "mask", "]"). Adds `tokens`, the top-k token strings ("" in
    padding)."""

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def serve_text(text):
        parts = tf.strings.split(text, sep="[MASK]")  # n parts around n - 1 masks
        pieces = parts.with_flat_values(tokenizer.tokenize(parts.flat_values))
        per_part = pieces.values  # [parts, (pieces)]
        lengths = per_part.row_lengths()
        last = tf.equal(tf.range(tf.size(lengths), dtype=tf.int64) + 1,
                        tf.gather(parts.row_limits(), parts.value_rowids()))
        with_mask = tf.concat([per_part, tf.fill([per_part.nrows(), 1], task.mask_id)], axis=1)
        keep = lengths + tf.cast(~last, tf.int64)  # the last part gets no [MASK] after it
        per_part = tf.ragged.boolean_mask(
            with_mask, tf.ragged.range(lengths + 1) < tf.expand_dims(keep, 1))
        ids = pieces.with_values(per_part).merge_dims(1, 2)
        inputs = pack_single(tokenizer, ids, max_seq_length)
        served = task.serving_outputs(task.outputs(model, inputs, training=False))
        real = tf.cast(served["mask"], tf.bool)[:, :, None]
        served["tokens"] = tf.where(real, tokenizer.id_to_token(served["token_ids"]), "")
        return served

    return serve_text


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


def _squad_serve_text_pair(task, model, tokenizer, max_seq_length):
    """`serve_text_pair` of a SquadTask (text_a: question, text_b: context): one window packed
    as run_squad's first (`[CLS] question [SEP] context [SEP]`, the question cut to
    `task.max_query_length` pieces, the context to what is left), and its best span as the
    original's post-processing of one window: among the `task.n_best_size` best starts and ends,
    both in the context, end >= start, at most `task.max_answer_length` pieces, the highest
    start + end logit; its text de-tokenized as the original's `tok_text` (pieces joined with
    spaces, " ##" and "##" removed): no mapping back to the context's own words. No valid
    span: "empty" with logits 0, as the original."""
    max_query_length = getattr(task, "max_query_length", 64)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)] * 2)
    def serve_text_pair(text_a, text_b):
        query = tokenizer.tokenize(text_a)[:, :max_query_length]
        doc = tokenizer.tokenize(text_b)
        query_length, doc_length = query.row_lengths(), doc.row_lengths()
        doc_length = tf.minimum(doc_length, max_seq_length - 3 - query_length)
        doc = tf.ragged.boolean_mask(
            doc, tf.ragged.range(doc.row_lengths()) < tf.expand_dims(doc_length, 1))
        batch = query.nrows()
        cls = tf.fill([batch, 1], tokenizer.cls_id)
        sep = tf.fill([batch, 1], tokenizer.sep_id)
        first = tf.concat([cls, query, sep], axis=1)
        second = tf.concat([doc, sep], axis=1)
        ids = tf.concat([first, second], axis=1)
        shape = [None, max_seq_length]
        inputs = {"input_ids": ids.to_tensor(0, shape=shape),
                  "input_mask": tf.ones_like(ids).to_tensor(0, shape=shape),
                  "segment_ids": tf.concat([tf.zeros_like(first), tf.ones_like(second)],
                                           axis=1).to_tensor(0, shape=shape)}
        outputs = task.serving_outputs(task.outputs(model, inputs, training=False))
        start_logits, end_logits = outputs["start_logits"], outputs["end_logits"]
        k = min(task.n_best_size, max_seq_length)
        starts = tf.math.top_k(start_logits, k).indices  # [B, k], best first
        ends = tf.math.top_k(end_logits, k).indices
        doc_start = tf.cast(query_length + 2, tf.int32)[:, None, None]
        doc_end = doc_start + tf.cast(doc_length, tf.int32)[:, None, None]
        s, e = starts[:, :, None], ends[:, None, :]
        valid = ((s >= doc_start) & (s < doc_end) & (e >= doc_start) & (e < doc_end)
                 & (e >= s) & (e - s + 1 <= task.max_answer_length))
        start_best = tf.gather(start_logits, starts, batch_dims=1)
        end_best = tf.gather(end_logits, ends, batch_dims=1)
        score = start_best[:, :, None] + end_best[:, None, :]
        score = tf.reshape(tf.where(valid, score, -float("inf")), [-1, k * k])
        best = tf.argmax(score, axis=-1, output_type=tf.int32)  # the first of ties, start-major
        found = tf.reduce_any(tf.reshape(valid, [-1, k * k]), axis=-1)
        start = tf.gather(starts, best // k, batch_dims=1)
        end = tf.gather(ends, best % k, batch_dims=1)
        length = tf.where(found, end - start + 1, 0)
        positions = tf.ragged.range(start, start + length)
        pieces = tf.gather(inputs["input_ids"], positions, batch_dims=1)
        text = tf.strings.reduce_join(tokenizer.id_to_token(pieces), axis=-1, separator=" ")
        text = tf.strings.regex_replace(tf.strings.regex_replace(text, " ##", ""), "##", "")
        text = tf.strings.reduce_join(tf.strings.split(text), axis=-1, separator=" ")
        start_logit = tf.where(found, tf.gather(start_logits, start, batch_dims=1), 0.0)
        end_logit = tf.where(found, tf.gather(end_logits, end, batch_dims=1), 0.0)
        return {"answer": tf.where(found, text, "empty"), "score": start_logit + end_logit,
                "start_logit": start_logit, "end_logit": end_logit}

    return serve_text_pair


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
    if task.name == "pretraining":
        return {"serve_text": _masked_lm_serve_text(task, model, tokenizer, max_seq_length)}
    if task.name == "tagging":
        signatures["serve_text"] = _ner_serve_text(task, model, tokenizer, max_seq_length)
    if task.name == "squad":
        signatures["serve_text_pair"] = _squad_serve_text_pair(task, model, tokenizer,
                                                               max_seq_length)
    return signatures


# Written into every export's assets; a folder holding it (and only a SavedModel's entries) is
# one of ours, which a new export may replace.
EXPORT_MARKER = "bert_tf_export.json"
_SAVED_MODEL_ENTRIES = {"saved_model.pb", "saved_model.pbtxt", "fingerprint.pb", "variables",
                        "assets", "assets.extra"}


def is_bert_tf_export(path):
    """Whether folder `path` is a SavedModel that `save` wrote (and holds nothing else)."""
    names = set(tf.io.gfile.listdir(path))
    return ("saved_model.pb" in names and names <= _SAVED_MODEL_ENTRIES
            and tf.io.gfile.exists(os.path.join(path, "assets", EXPORT_MARKER)))


def check_export_dir(export_dir, keep=None, name="export_dir"):
    """Before any work: `export_dir` is new, empty, or an earlier export of ours (which `save`
    then replaces); anything else, or a folder that is or holds one of `keep` ({name: path}:
    the run's output and checkpoint folders), raises an InputError naming `name`."""
    from bert_tf.io_utils import check_replaceable_dir
    check_replaceable_dir(export_dir, name, is_bert_tf_export, "a SavedModel exported by "
                          "bert_tf", keep=keep)


def save(task, model, export_dir, vocab_file=None, do_lower_case=True, max_seq_length=128,
         log=print, tokenizer=None):
    """Writes the SavedModel (see the module docstring) to export_dir, under a temporary name
    renamed when complete. Without `vocab_file`, only the token-id signature is saved.
    `tokenizer`: another tf.Module with GraphTokenizer's methods for the string signatures
    (bench/bench_serving.py exports the same model with tensorflow-text's tokenizers)."""
    from bert_tf.io_utils import atomic_output

    signatures = dict(task.serving_signatures(model))
    module = tf.Module()
    # The variables only: a Keras model attached here would add Keras' own default signature.
    module.model_variables = [v.value for v in model.variables]
    if vocab_file:
        from bert_tf.graph_tokenization import GraphTokenizer
        module.tokenizer = tokenizer or GraphTokenizer(vocab_file, do_lower_case=do_lower_case)
        signatures.update(text_signatures(task, model, module.tokenizer, max_seq_length))
    config = getattr(model, "config", None)
    check_export_dir(export_dir)
    assets = {EXPORT_MARKER: {"task": task.name, "signatures": sorted(signatures),
                              "max_seq_length": max_seq_length if vocab_file else None}}
    if config is not None:
        assets["bert_config.json"] = config.to_dict()
    with atomic_output(export_dir) as tmp:
        tf.saved_model.save(module, tmp, signatures=signatures)
        tf.io.gfile.makedirs(os.path.join(tmp, "assets"))
        for filename, content in assets.items():
            with tf.io.gfile.GFile(os.path.join(tmp, "assets", filename), "w") as f:
                f.write(json.dumps(content, indent=2, sort_keys=True) + "\n")
    log(f"exported {export_dir} (signatures: {', '.join(signatures)})")
    return export_dir
