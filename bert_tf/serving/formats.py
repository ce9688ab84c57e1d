"""The export formats of export_savedmodel, and which task and quantization each can take.

  saved_model  bert_tf.serving.export: every task; token ids and raw strings (the default);
  tfhub        bert_tf.serving.tfhub: task encoder: export_dir/preprocessor and
               export_dir/encoder, TF Hub's text contract;
  litert       bert_tf.serving.litert: tasks encoder and classifier, on token ids:
               export_dir/model.tflite, fp32 or dynamic-range int8;
  huggingface  bert_tf.serving.huggingface: every task; a transformers BERT directory (the
               encoder with a pooling: a sentence-transformers one), float32;
  keras_hub    bert_tf.serving.keras_hub: tasks encoder, classifier and pretraining: a
               keras-hub preset directory (BertBackbone, BertTextClassifier, BertMaskedLM).
(saved_model and litert take quantization int8; tfhub's encoder is float32, to be fine-tuned.)

`check_options` refuses a combination before any work (an InputError naming the argument),
`check_model` a model the format cannot express, once its config and vocabulary are known;
`save` writes the chosen format. Which folders an export may replace:
bert_tf.serving.export_folders.check_export_dir.
"""
import os

from bert_tf.errors import argument_error
from bert_tf.serving import export, huggingface, keras_hub, litert, tfhub

FORMATS = ("saved_model", "tfhub", "litert", "huggingface", "keras_hub")


def check_options(export_format, task_name, quantization="none",
                  litert_signature="serving_default"):
    """Raises an InputError naming `format`, `task`, `quantization` or `litert_signature` when
    the format cannot export the task that way."""
    if export_format not in FORMATS:
        raise argument_error("format", f"unknown format {export_format!r}: one of "
                                       f"{', '.join(FORMATS)}")
    export.check_quantization(quantization)
    if export_format == "litert":
        litert.check_options(task_name, quantization, litert_signature)
        return
    if litert_signature != litert.SIGNATURE:
        raise argument_error("litert_signature", f"is for format litert, not {export_format}")
    if export_format == "keras_hub":
        keras_hub.check_task(task_name)
        if quantization != "none":
            raise argument_error("quantization", "keras-hub presets are float32 (int8: format "
                                                 "litert or saved_model)")
    if export_format == "tfhub":
        if task_name != "encoder":
            raise argument_error("task", f"the TF Hub format exports the encoder (task "
                                         f"encoder), not {task_name}")
        if quantization != "none":
            raise argument_error("quantization", "the TF Hub encoder is exported to be "
                                                 "fine-tuned: float32 only (int8: format "
                                                 "litert or saved_model)")
    if export_format == "huggingface" and quantization != "none":
        raise argument_error("quantization", "the Hugging Face format holds float32 weights "
                                             "(int8: format litert or saved_model)")


def check_model(export_format, task_name, config, vocab_file):
    """Before the checkpoint is read: an InputError when `export_format` cannot express the
    model (its BertConfig `config`, its vocabulary: the tokenizer the format writes)."""
    if export_format == "huggingface":
        huggingface.check_vocabulary(vocab_file)
    if export_format == "keras_hub":
        keras_hub.check_model(task_name, config, vocab_file)


def save(export_format, task, model, export_dir, vocab_file=None, do_lower_case=True,
         quantization="none", log=print):
    """Writes `task`'s `model` to export_dir in `export_format` (`check_options` first)."""
    check_options(export_format, task.name, quantization)
    if export_format == "tfhub":
        return tfhub.save(task, model, export_dir, vocab_file, do_lower_case, log=log)
    if export_format == "huggingface":
        return huggingface.save(task, model, export_dir, vocab_file, do_lower_case, log=log)
    if export_format == "keras_hub":
        return keras_hub.save(task, model, export_dir, vocab_file, do_lower_case, log=log)
    if export_format == "litert":
        return litert.save(task, model, export_dir, quantization, vocab_file, log=log)
    return export.save(task, model, os.fspath(export_dir), vocab_file, do_lower_case, log=log,
                       quantization=quantization)
