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

    return {"serve_text": serve_text, "serve_text_pair": serve_text_pair}


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
