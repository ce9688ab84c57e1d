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
  export replaces the folder only when it holds nothing else
  (bert_tf.serving.export_folders).

What each signature returns is the task's (`Task.serving_outputs`, `Task.text_signatures`, on
the inputs of its preprocessor, `Task.text_preprocessor`):
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
from bert_tf.io_utils import atomic_output, checkpoint_folder
from bert_tf.model import quantization
from bert_tf.serving.export_folders import check_export_dir, write_marker
from bert_tf.text.graph_tokenization import GraphTokenizer


def token_id_signature(task, model):
    """`serving_default`: the task's model on input_ids, input_mask, segment_ids (int32
    [batch, length]; [batch, choices, length] for multiple choice: `task.token_id_rank`),
    returning `task.serving_outputs`."""
    spec = tf.TensorSpec([None] * task.token_id_rank, tf.int32)

    @tf.function(input_signature=[spec, spec, spec], autograph=False)
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
        # The task's preprocessor packs served texts as its records (bert_tf.tasks.preprocessor).
        module.tokenizer = tokenizer or GraphTokenizer(vocab_file, do_lower_case=do_lower_case)
        signatures.update(task.text_signatures(model, task.text_preprocessor(module.tokenizer)))
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


def check_run_export_dir(export_dir, output_dir=None, init_checkpoint=None):
    """Before a training run's work: `export_dir` may take the run's SavedModel
    (`check_export_dir`), and is neither the run's output_dir nor its init_checkpoint's folder
    (the export would replace them)."""
    keep = {"output_dir": os.fspath(output_dir)} if output_dir else {}
    if init_checkpoint:
        keep["init_checkpoint"] = checkpoint_folder(init_checkpoint)
    check_export_dir(os.fspath(export_dir), keep=keep)


def trained_model_exporter(export_dir, vocab_file, do_lower_case, output_dir=None,
                           init_checkpoint=None):
    """The `export` of `bert_tf.training.runner.run` for a run that saves its model to
    `export_dir` (None when it is not given): checks the folder now
    (`check_run_export_dir`), and `export(task, model, log)` then `save`s the trained model
    with the run's vocabulary (the raw-string signatures; none without `vocab_file`)."""
    if not export_dir:
        return None
    check_run_export_dir(export_dir, output_dir, init_checkpoint)
    export_dir = os.fspath(export_dir)

    def export(task, model, log):
        save(task, model, export_dir, vocab_file, do_lower_case, log=log)

    return export
