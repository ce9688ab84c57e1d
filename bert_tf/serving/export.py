"""SavedModels that serve a task on token ids and on raw strings.

A SavedModel written here has:
- `serving_default`: the task's signature on token ids (`input_ids`, `input_mask`,
  `segment_ids`: int32 [batch, length], multiple choice [batch, choices, length];
  `token_id_signature`);
- `serve_text` (`text`: string [batch]) and `serve_text_pair` (`text_a`, `text_b`): the same
  outputs from raw strings, tokenized and packed in the graph as the original's
  convert_single_example (`bert_tf.text.graph_tokenization.GraphTokenizer.bert_inputs`: `[CLS] a
  [SEP] (b [SEP])`, truncated as `_truncate_seq_pair`, zero-padded to max_seq_length; an empty
  string is `[CLS] [SEP]`, a long one is cut, as the original does);
- `assets/vocab.txt` (the tokenizer's table reads it: no absolute path is kept),
  `assets/bert_config.json`, and `assets/bert_tf_export.json` (what was exported: task,
  signatures, max_seq_length; and `contents`, every file and folder written), by which a later
  export replaces the folder only when it holds nothing else (`check_export_dir`).

What each signature returns is the task's (`Task.serving_outputs`, `Task.text_signatures`):
classifier: probabilities, logits and the label name of each row when the labels are known;
encoder: sequence and pooled outputs, and with a pooling (`EncoderConfig.pooling`) `embed_text`:
`text` -> `embedding` [batch, hidden], one sentence embedding per string; ner: `serve_text` returns `words`, `tags` (the tag of
each word's first piece) and `num_words`; squad: `serve_text_pair` (question, context) returns
the best span's `answer` (de-tokenized WordPiece text), `score`, `start_logit` and
`end_logit`; pretraining (the masked LM): `serve_text` only, on texts where the literal
"[MASK]" is the mask token; at each mask, the `top_k` `tokens`, `token_ids` and
`probabilities`; multiple_choice: `serve_choices` only (`context` [batch], `endings` [batch, N]
strings), `probabilities` and `logits` [batch, N] and the best ending's index `choice`.
"""
import json
import os

import tensorflow as tf

from bert_tf.errors import argument_error
from bert_tf.io_utils import atomic_output, check_replaceable_dir
from bert_tf.model import quantization
from bert_tf.text.graph_tokenization import GraphTokenizer

# Written last into every export (a SavedModel's in its assets/): what was exported, and
# `contents`, every file and folder the export wrote. A later export replaces a folder only when
# it holds nothing else, at any depth (`unexpected_entries`), so a user's file put into an
# export (assets/notes.txt, a file beside model.tflite) is never deleted with it.
EXPORT_MARKER = "bert_tf_export.json"


def write_marker(root, description, marker_folder="assets"):
    """Writes root/marker_folder/EXPORT_MARKER: `description` and `contents`, the sorted
    "/"-separated relative paths of every file and folder under `root` (the marker included).
    Call it when the export's every other file is written."""
    tf.io.gfile.makedirs(os.path.join(root, marker_folder))
    marker = f"{marker_folder}/{EXPORT_MARKER}" if marker_folder else EXPORT_MARKER
    contents = sorted(set(_entries(root)) | {marker})
    with tf.io.gfile.GFile(os.path.join(root, marker), "w") as f:
        f.write(json.dumps(dict(description, contents=contents), indent=2, sort_keys=True)
                + "\n")


def _entries(root, folder=""):
    """Every file and folder under root/folder as a relative path ("x/" for a folder), not
    following symbolic links (one is an entry, whatever it points to)."""
    for name in sorted(tf.io.gfile.listdir(os.path.join(root, folder) if folder else root)):
        name = name.rstrip("/")
        relative = f"{folder}/{name}" if folder else name
        path = os.path.join(root, relative)
        if tf.io.gfile.isdir(path) and not os.path.islink(path):
            yield relative + "/"
            yield from _entries(root, relative)
        else:
            yield relative


def unexpected_entries(path, marker_folder="assets"):
    """What folder `path` holds, at any depth, beyond what the export recorded in its marker
    (path/marker_folder/EXPORT_MARKER) wrote: a sorted list of relative paths ("assets/notes.txt",
    "extra/" for a whole folder), [] for an export exactly as written; None when there is no
    such marker (no export of ours, or a marker without `contents`). The one check of every
    format (SavedModel, TF Hub's two, LiteRT) before a new export replaces a folder."""
    marker = os.path.join(path, marker_folder, EXPORT_MARKER)
    try:
        with tf.io.gfile.GFile(marker) as f:
            contents = json.load(f)["contents"]
    except (tf.errors.OpError, OSError, ValueError, KeyError, TypeError):
        return None
    if not (isinstance(contents, list) and all(isinstance(entry, str) for entry in contents)):
        return None
    written, unexpected = set(contents), []
    for entry in _entries(path):
        inside_unexpected = any(entry.startswith(u) for u in unexpected if u.endswith("/"))
        if entry not in written and not inside_unexpected:
            unexpected.append(entry)
    return unexpected


def is_bert_tf_export(path):
    """Whether folder `path` is a SavedModel that `save` wrote, holding nothing else."""
    return unexpected_entries(path) == []


def check_export_dir(export_dir, keep=None, name="export_dir"):
    """Before any work: `export_dir` is new, empty, or an earlier SavedModel export of ours
    holding nothing but what it wrote (which `save` then replaces); anything else, or a
    folder that is or holds one of `keep` ({name: path}: the run's output and checkpoint
    folders), raises an InputError naming `name` (and the first unexpected file)."""
    check_replaceable_dir(export_dir, name, unexpected_entries, "a SavedModel exported by "
                          "bert_tf", keep=keep)


def token_id_signature(task, model):
    """`serving_default`: the task's model on input_ids, input_mask, segment_ids (int32
    [batch, length]; [batch, choices, length] for multiple choice: `task.token_id_rank`),
    returning `task.serving_outputs`."""
    spec = tf.TensorSpec([None] * task.token_id_rank, tf.int32)

    @tf.function(input_signature=[spec, spec, spec])
    def serve(input_ids, input_mask, segment_ids):
        outputs = task.outputs(model, {"input_ids": input_ids, "input_mask": input_mask,
                                       "segment_ids": segment_ids}, training=False)
        return task.serving_outputs(outputs)

    return serve


QUANTIZATIONS = ("none", "int8")


def check_quantization(quantization):
    """An InputError naming `quantization` unless it is one of QUANTIZATIONS (every format's)."""
    if quantization not in QUANTIZATIONS:
        raise argument_error("quantization", f"must be one of {', '.join(QUANTIZATIONS)}, got "
                                             f"{quantization!r}")


def quantized_copy(task, model):
    """A copy of `model` (the task's) with its transformer dense layers in int8
    (bert_tf.model.quantization); `model` itself is left as it is."""
    copy = task.build_model()
    copy.set_weights(model.get_weights())
    return quantization.quantize(copy)


def save(task, model, export_dir, vocab_file=None, do_lower_case=True, log=print,
         tokenizer=None, quantization="none"):
    """Writes the SavedModel (see the module docstring) to export_dir, under a temporary name
    renamed when complete. Without `vocab_file`, only the token-id signature is saved; the
    string signatures pack texts to the task's `config.max_seq_length`. `tokenizer`: another
    tf.Module with GraphTokenizer's methods for the string signatures (bench/serving/latency.py
    exports the same model with tensorflow-text's tokenizers). `quantization`: "none", or
    "int8": the transformer dense layers in int8 (`quantized_copy`; a SavedModel for x86 CPUs,
    bert_tf.model.quantization)."""
    check_quantization(quantization)
    if quantization == "int8":
        try:
            model = quantized_copy(task, model)
        except RuntimeError as e:
            raise argument_error("quantization", str(e)) from None
    signatures = {"serving_default": token_id_signature(task, model)}
    module = tf.Module()
    # The variables only: a Keras model attached here would add Keras' own default signature.
    module.model_variables = [v.value for v in model.variables]
    if vocab_file:
        module.tokenizer = tokenizer or GraphTokenizer(vocab_file, do_lower_case=do_lower_case)
        signatures.update(task.text_signatures(model, module.tokenizer))
    check_export_dir(export_dir)
    max_seq_length = task.config.max_seq_length if vocab_file else None
    description = {"task": task.name, "signatures": sorted(signatures),
                   "max_seq_length": max_seq_length, "quantization": quantization}
    description.update(task.export_description())
    with atomic_output(export_dir) as tmp:
        tf.saved_model.save(module, tmp, signatures=signatures)
        tf.io.gfile.makedirs(os.path.join(tmp, "assets"))
        if task.config.bert_config is not None:
            with tf.io.gfile.GFile(os.path.join(tmp, "assets", "bert_config.json"), "w") as f:
                f.write(json.dumps(task.config.bert_config.to_dict(), indent=2,
                                   sort_keys=True) + "\n")
        write_marker(tmp, description)
    log(f"exported {export_dir} (signatures: {', '.join(signatures)})")
    return export_dir
