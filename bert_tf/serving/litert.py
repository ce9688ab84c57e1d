"""LiteRT (TensorFlow Lite) export of the encoder and the classifier, on token ids.

`convert(task, model, quantization)` turns the task's `serving_default` (the SavedModel's
token-id signature, `bert_tf.serving.export.token_id_signature`: `input_ids`, `input_mask`,
`segment_ids` int32 [batch, length] in; the encoder's `sequence_output` and `pooled_output`, or
the classifier's `probabilities` and `logits`, out) into a .tflite flatbuffer with TensorFlow's
converter, builtin ops only, with a `serving_default` signature under the same names:
  quantization "none": float32 weights and arithmetic;
  quantization "int8": dynamic-range quantization (converter optimizations DEFAULT): weights
    stored as int8 (about 4x smaller), matrix products on int8 with activations quantized per
    batch at run time, the rest float32.
The batch and the length are dynamic: resize the interpreter's inputs to [batch, length].
`save` writes export_dir/model.tflite, the vocabulary and the config beside it (tokenize with
them outside the model: `bert_tf.text.packing.pack_texts`), and bert_tf_export.json (task,
quantization, max_seq_length, labels, the signature's inputs and outputs, the files written).

What LiteRT's builtin ops cannot do: the string signatures (`serve_text`, `serve_text_pair`).
The graph tokenizer's string ops (UnicodeDecode, StringSplitV2, Substr, ...), hash tables and
tensor lists have no builtin kernel: the converter stops at the first tensor list it cannot
lower, and with that lowering off it lists the string ops as "neither a custom op nor a flex
op"; with SELECT_TF_OPS the conversion succeeds but ai-edge-litert's interpreter has no Flex
delegate to run it (docs/export.md, LiteRT, quotes each message). `check_signature` refuses
them before any work. The other tasks (squad, ner, pretraining) are not offered here.

The attention bias is built with expand_dims rather than a strided slice adding two axes
(bert_tf.model.layers.attention_bias_from_mask), which the converter has no builtin for.
"""
import os
import shutil
import tempfile

import numpy as np
import tensorflow as tf

from bert_tf.errors import argument_error
from bert_tf.io_utils import atomic_output
from bert_tf.serving import export
from bert_tf.serving.export import token_id_signature
from bert_tf.serving.export_folders import check_export_dir, write_marker

MODEL_FILE = "model.tflite"
TASKS = ("encoder", "classifier")
SIGNATURE = "serving_default"
TEXT_SIGNATURES = ("serve_text", "serve_text_pair")


def check_signature(signature):
    """Raises an InputError naming `litert_signature` unless it is the token-id signature."""
    if signature == SIGNATURE:
        return
    if signature in TEXT_SIGNATURES:
        raise argument_error(
            "litert_signature", f"{signature} takes raw strings, and LiteRT's builtin ops "
            f"cannot tokenize them (TensorFlow's converter fails on the graph tokenizer's "
            f"string, hash-table and tensor-list ops: docs/export.md, LiteRT); export "
            f"{SIGNATURE} (token ids) and tokenize beside the interpreter")
    raise argument_error("litert_signature", f"unknown signature {signature!r}: {SIGNATURE}")


def check_options(task_name, quantization="none", signature=SIGNATURE):
    """Raises an InputError naming the argument when LiteRT cannot export this combination."""
    if task_name not in TASKS:
        raise argument_error("task", f"the LiteRT format exports {' or '.join(TASKS)}, not "
                                     f"{task_name}")
    export.check_quantization(quantization)
    check_signature(signature)


def convert(task, model, quantization="none"):
    """The .tflite flatbuffer (bytes) of `task`'s token-id signature on `model` (see the module
    docstring); `quantization` "none" or "int8" (dynamic range)."""
    return _convert(task, model, quantization)[0]


def _convert(task, model, quantization):
    """(the flatbuffer, the signature's output names)."""
    check_options(task.name, quantization)
    module = tf.Module()
    module.model_variables = [v.value for v in model.variables]
    signature = token_id_signature(task, model)
    outputs = sorted(signature.get_concrete_function().structured_outputs)
    with tempfile.TemporaryDirectory() as tmp:
        # From a SavedModel, so that the .tflite keeps the signature and its tensor names.
        tf.saved_model.save(module, tmp, signatures={SIGNATURE: signature})
        converter = tf.lite.TFLiteConverter.from_saved_model(tmp, signature_keys=[SIGNATURE])
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
        if quantization == "int8":
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
        return converter.convert(), outputs


def save(task, model, export_dir, quantization="none", vocab_file=None, log=print):
    """Writes export_dir/model.tflite (`convert`), the vocabulary (vocab.txt, when given), the
    config and the export's description, under a temporary name renamed when complete.
    `export_dir` must be new, empty or an earlier export (`check_export_dir`): nothing else is
    replaced."""
    check_export_dir(export_dir)
    flatbuffer, outputs = _convert(task, model, quantization)
    description = {"task": task.name, "format": "litert", "quantization": quantization,
                   "max_seq_length": task.config.max_seq_length, "signature": SIGNATURE,
                   "inputs": ["input_ids", "input_mask", "segment_ids"], "outputs": outputs}
    description.update(task.export_description())
    with atomic_output(export_dir) as tmp:
        os.makedirs(tmp)
        with open(os.path.join(tmp, MODEL_FILE), "wb") as f:
            f.write(flatbuffer)
        if vocab_file:
            shutil.copyfile(vocab_file, os.path.join(tmp, "vocab.txt"))
        if task.config.bert_config is not None:
            task.config.bert_config.to_json_file(os.path.join(tmp, "bert_config.json"))
        write_marker(tmp, description, marker_folder="")
    log(f"exported {os.path.join(export_dir, MODEL_FILE)} ({len(flatbuffer) / 2**20:.1f} MiB, "
        f"{quantization}; outputs: {', '.join(outputs)})")
    return export_dir


class Runner:
    """A .tflite model's `serving_default` on numpy inputs: `runner(input_ids=...,
    input_mask=..., segment_ids=...)` -> {output name: numpy array}.

    `interpreter`: a LiteRT interpreter of the model, e.g.
    `ai_edge_litert.interpreter.Interpreter(model_path=...)` (ai-edge-litert is the tests' and
    benches' dependency, not the package's). The inputs are resized (and the tensors allocated
    again) only when a call's shape differs from the previous one's, which ai-edge-litert's
    SignatureRunner does on every call."""

    def __init__(self, interpreter):
        self.interpreter = interpreter
        signature = interpreter.get_signature_runner(SIGNATURE)
        self._inputs = {name: detail["index"]
                        for name, detail in signature.get_input_details().items()}
        self._outputs = {name: detail["index"]
                         for name, detail in signature.get_output_details().items()}
        self._shape = None

    def __call__(self, **inputs):
        inputs = {name: np.asarray(value, np.int32) for name, value in inputs.items()}
        if set(inputs) != set(self._inputs):
            raise ValueError(f"inputs {sorted(inputs)}, expected {sorted(self._inputs)}")
        shape = inputs["input_ids"].shape
        if shape != self._shape:
            for index in self._inputs.values():
                self.interpreter.resize_tensor_input(index, shape)
            self.interpreter.allocate_tensors()
            self._shape = shape
        for name, value in inputs.items():
            self.interpreter.set_tensor(self._inputs[name], value)
        self.interpreter.invoke()
        return {name: self.interpreter.get_tensor(index)
                for name, index in self._outputs.items()}
