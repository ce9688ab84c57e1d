"""keras-hub BERT presets as a checkpoint format: the weight layout, and reading one.

A keras-hub preset directory (what `keras_hub.models.BertBackbone.save_to_preset` and the tasks'
`save_to_preset` write) holds config.json (the BertBackbone's Keras config), model.weights.h5
(the backbone's weights, in Keras 3's layout: one HDF5 group per layer, `vars/0`, `vars/1`, ...
in each layer's variable order), tokenizer.json and assets/tokenizer/vocabulary.txt (the
BertTokenizer: its casing and vocabulary), metadata.json, and for a task, task.json,
task.weights.h5 (the head's weights) and preprocessor.json. keras-hub's BERT tasks are
BertTextClassifier (a Dense on the pooled output: run_classifier's head) and BertMaskedLM (the
masked-LM head, its output tied to the token embedding); it has no next-sentence head.

`backbone_layout`/`task_layout` are the one table between the two namings (the original's TF1
names, bert_tf.model.variable_names, and the HDF5 paths), used both ways: `PresetValues` reads a
preset as a name -> array mapping in the original naming (bert_tf.model.checkpoints loads it
into any model: `--init_checkpoint=PRESET_DIR` for every command) and `model_files` gives its
config, vocabulary and casing; bert_tf.serving.keras_hub writes one. The fused query/key/value
projection is one [H, 3H] variable of ours; keras-hub keeps query, key and value as EinsumDense
kernels [H, heads, head_size] (and biases [heads, head_size]), its attention output kernel as
[heads, head_size, H]: each is a reshape of the original's [H, H] (or [H]).
"""
import io
import json
import os

import h5py
import numpy as np
import tensorflow as tf

from bert_tf.errors import InputError, file_error
from bert_tf.io_utils import is_url
from bert_tf.model.config import BertConfig

CONFIG_FILE = "config.json"
MODEL_WEIGHTS_FILE = "model.weights.h5"
TASK_CONFIG_FILE = "task.json"
TASK_WEIGHTS_FILE = "task.weights.h5"
TOKENIZER_FILE = "tokenizer.json"
PREPROCESSOR_FILE = "preprocessor.json"
METADATA_FILE = "metadata.json"
VOCABULARY_FILE = "assets/tokenizer/vocabulary.txt"

# The keras-hub version whose `save_to_preset` layout is read and written (Keras 3's weights
# files name each layer's group by its class and attribute; other versions may differ).
LAYOUT_VERSION = "0.32.0"
BACKBONE = "BertBackbone"
# Our task -> keras-hub's task class (the encoder is the backbone alone).
TASK_CLASSES = {"classifier": "BertTextClassifier", "pretraining": "BertMaskedLM"}

# How a keras-hub array relates to the original's: the same; split into heads (query, key and
# value kernels [H, H] -> [H, heads, size], biases [H] -> [heads, size]); the attention output
# kernel's input split into heads ([H, H] -> [heads, size, H]); or the transpose
# (run_classifier's output_weights are [labels, H], a Dense kernel [H, labels]).
SAME, HEADS, HEADS_IN, TRANSPOSE = "same", "heads", "heads_in", "transpose"


def _dense(path, prefix, kind=SAME):
    return [(f"{path}/vars/0", f"{prefix}/kernel", kind), (f"{path}/vars/1", f"{prefix}/bias",
                                                            kind)]


def _layer_norm(path, prefix):
    # Keras' LayerNormalization holds gamma, then beta.
    return [(f"{path}/vars/0", f"{prefix}/gamma", SAME), (f"{path}/vars/1", f"{prefix}/beta", SAME)]


def transformer_layer_group(index):
    """Keras names a model's layers in its weights file by their class, numbered in order."""
    return "layers/transformer_encoder" + (f"_{index}" if index else "")


def backbone_layout(num_layers):
    """[(HDF5 dataset path in model.weights.h5, original name, how)] of a BertBackbone
    of `num_layers` layers."""
    entries = [("layers/reversible_embedding/vars/0", "bert/embeddings/word_embeddings", SAME),
               ("layers/position_embedding/vars/0", "bert/embeddings/position_embeddings", SAME),
               ("layers/embedding/vars/0", "bert/embeddings/token_type_embeddings", SAME)]
    entries += _layer_norm("layers/layer_normalization", "bert/embeddings/LayerNorm")
    for i in range(num_layers):
        group, prefix = transformer_layer_group(i), f"bert/encoder/layer_{i}"
        for part in ("query", "key", "value"):
            entries += _dense(f"{group}/_self_attention_layer/{part}_dense",
                              f"{prefix}/attention/self/{part}", HEADS)
        entries += [(f"{group}/_self_attention_layer/output_dense/vars/0",
                     f"{prefix}/attention/output/dense/kernel", HEADS_IN),
                    (f"{group}/_self_attention_layer/output_dense/vars/1",
                     f"{prefix}/attention/output/dense/bias", SAME)]
        entries += _layer_norm(f"{group}/_self_attention_layer_norm",
                               f"{prefix}/attention/output/LayerNorm")
        entries += _dense(f"{group}/_feedforward_intermediate_dense",
                          f"{prefix}/intermediate/dense")
        entries += _dense(f"{group}/_feedforward_output_dense", f"{prefix}/output/dense")
        entries += _layer_norm(f"{group}/_feedforward_layer_norm", f"{prefix}/output/LayerNorm")
    return entries + _dense("layers/dense", "bert/pooler/dense")


def task_layout(task_class):
    """[(HDF5 dataset path in task.weights.h5, original name, SAME|TRANSPOSE)] of a keras-hub
    task's head: BertTextClassifier's `logits` Dense, BertMaskedLM's `mlm_head`."""
    if task_class == "BertTextClassifier":
        return [("layers/dense/vars/0", "output_weights", TRANSPOSE),
                ("layers/dense/vars/1", "output_bias", SAME)]
    if task_class == "BertMaskedLM":
        head = "layers/masked_lm_head"
        return (_dense(f"{head}/_intermediate_dense", "cls/predictions/transform/dense")
                + _layer_norm(f"{head}/_intermediate_layer_norm",
                              "cls/predictions/transform/LayerNorm")
                + [(f"{head}/vars/0", "cls/predictions/output_bias", SAME)])
    return []


def to_keras(array, kind, config):
    """The original's array as keras-hub holds it (`config`: the model's BertConfig)."""
    if kind == TRANSPOSE:
        return np.ascontiguousarray(np.transpose(array))
    heads, size = config.num_attention_heads, config.head_size
    if kind == HEADS:
        return array.reshape(array.shape[:-1] + (heads, size))
    if kind == HEADS_IN:
        return array.reshape((heads, size) + array.shape[1:])
    return array


def to_original(array, kind, original_shape):
    """keras-hub's array in the original's shape."""
    if kind == TRANSPOSE:
        return np.ascontiguousarray(np.transpose(array))
    if kind in (HEADS, HEADS_IN):
        return array.reshape(original_shape)
    return array


def read_json(path):
    """A preset's JSON file as an object; InputError naming it when it is not JSON."""
    with tf.io.gfile.GFile(path) as f:
        text = f.read()
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise file_error(path, f"not valid JSON: {e.msg}", e.lineno) from None


def class_name(serialized):
    """A keras-hub JSON config's class (`registered_name` "keras_hub>BertBackbone" ->
    "BertBackbone"), or None when it is no keras-hub object."""
    if not isinstance(serialized, dict):
        return None
    name = serialized.get("registered_name") or ""
    return name.split(">", 1)[1] if name.startswith("keras_hub>") else None


def is_preset(path):
    """Whether `path` is a directory holding a keras-hub preset's config.json (a keras-hub
    class: the BERT ones are read, another model's is refused by `preset_config`)."""
    path = os.fspath(path)
    config = os.path.join(path, CONFIG_FILE)
    if not (tf.io.gfile.isdir(path) and tf.io.gfile.exists(config)):
        return False
    try:
        with tf.io.gfile.GFile(config) as f:
            return class_name(json.loads(f.read())) is not None
    except (ValueError, tf.errors.OpError):
        return False


def preset_config(path):
    """The BertConfig of the keras-hub preset `path` (its config.json's BertBackbone). A
    preset of another model, or a config our encoder cannot compute as keras-hub does, is an
    InputError naming the file."""
    config_file = os.path.join(path, CONFIG_FILE)
    serialized = read_json(config_file)
    name = class_name(serialized)
    if name != BACKBONE:
        raise file_error(config_file, f"a keras-hub preset of {name}, not {BACKBONE}: only "
                                      f"BERT presets are read")
    values = serialized.get("config")
    keys = ("vocabulary_size", "num_layers", "num_heads", "hidden_dim", "intermediate_dim",
            "max_sequence_length", "num_segments")
    if not isinstance(values, dict) or any(k not in values for k in keys):
        raise file_error(config_file, f"a {BACKBONE} config needs the keys {', '.join(keys)}")
    dropout = values.get("dropout", 0.1)
    try:
        # keras-hub's BertBackbone: tanh GELU (ours "gelu") and LayerNorm epsilon 1e-12, one
        # dropout rate for both of the original's.
        return BertConfig(vocab_size=values["vocabulary_size"], hidden_size=values["hidden_dim"],
                          num_hidden_layers=values["num_layers"],
                          num_attention_heads=values["num_heads"],
                          intermediate_size=values["intermediate_dim"], hidden_act="gelu",
                          hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout,
                          max_position_embeddings=values["max_sequence_length"],
                          type_vocab_size=values["num_segments"])
    except InputError as e:
        raise file_error(config_file, str(e)) from None


def preset_task(path):
    """The keras-hub task class of the preset `path` (task.json: "BertTextClassifier",
    "BertMaskedLM"), or None for a backbone alone."""
    task_file = os.path.join(path, TASK_CONFIG_FILE)
    if not tf.io.gfile.exists(task_file):
        return None
    return class_name(read_json(task_file))


def preset_casing(path):
    """do_lower_case of the preset's tokenizer.json (None: no tokenizer). keras-hub's
    BertTokenizer lower-cases with `lowercase` and strips accents with `strip_accents`; the
    original's uncased tokenizer does both, its cased one neither: another combination is an
    InputError naming the file."""
    tokenizer_file = os.path.join(path, TOKENIZER_FILE)
    if not tf.io.gfile.exists(tokenizer_file):
        return None
    serialized = read_json(tokenizer_file)
    values = serialized.get("config") if isinstance(serialized, dict) else None
    if not isinstance(values, dict):
        raise file_error(tokenizer_file, "holds no tokenizer config")
    lowercase, strip_accents = bool(values.get("lowercase")), bool(values.get("strip_accents"))
    if lowercase != strip_accents:
        raise file_error(tokenizer_file, f"lowercase {lowercase} with strip_accents "
                                         f"{strip_accents}: the original's tokenizer does both "
                                         f"(uncased) or neither (cased)")
    if values.get("suffix_indicator", "##") != "##" or values.get("oov_token",
                                                                   "[UNK]") != "[UNK]":
        raise file_error(tokenizer_file, "the original's WordPiece marks a word's later pieces "
                                         "with ## and unknown words with [UNK]")
    return lowercase


def model_files(path):
    """For a keras-hub preset directory: (BertConfig, vocabulary path or None, do_lower_case or
    None), what command lines use unless flags say otherwise; None for other paths."""
    if not is_preset(path):
        return None
    path = os.fspath(path)
    vocabulary = os.path.join(path, VOCABULARY_FILE)
    return (preset_config(path), vocabulary if tf.io.gfile.exists(vocabulary) else None,
            preset_casing(path))


def open_h5(path):
    """The HDF5 file `path`, open to read (a local file read lazily, a URL's read into memory);
    InputError naming it when it is missing or not HDF5."""
    if not tf.io.gfile.exists(path):
        raise file_error(path, "not found (a keras-hub preset holds its weights there)")
    source = path
    if is_url(path):
        with tf.io.gfile.GFile(path, "rb") as f:
            source = io.BytesIO(f.read())
    try:
        return h5py.File(source, "r")
    except OSError as e:
        raise file_error(path, f"not an HDF5 weights file ({e})") from None


def _datasets(h5):
    """Every dataset's path in an open HDF5 file."""
    found = []
    h5.visititems(lambda name, obj: found.append(name) if isinstance(obj, h5py.Dataset)
                  else None)
    return found


class PresetValues:
    """A name -> numpy mapping in the original naming over a keras-hub preset's weights
    (model.weights.h5, and task.weights.h5 of a BertTextClassifier or BertMaskedLM). Datasets
    outside the layout keep their HDF5 path (reported as unused), but the optimizer state a
    task's file carries, which is skipped. The backbone's layers are named as many as the file
    holds: more than config.json says are unused encoder layers (refused by the loader)."""

    def __init__(self, directory):
        self.directory = os.fspath(directory)
        config = preset_config(self.directory)
        self.sources = {}  # name -> (file, HDF5 path, kind, shape in the original)
        self.files = {}
        layouts = [(MODEL_WEIGHTS_FILE, backbone_layout)]
        task = preset_task(self.directory)
        if task is not None:
            layouts.append((TASK_WEIGHTS_FILE, lambda _: task_layout(task)))
        for file_name, layout_of in layouts:
            path = os.path.join(self.directory, file_name)
            h5 = self.files[file_name] = open_h5(path)
            datasets = _datasets(h5)
            held = 0
            while any(p.startswith(transformer_layer_group(held) + "/") for p in datasets):
                held += 1
            layout = layout_of(max(config.num_hidden_layers, held))
            known = {h5_path: (name, kind) for h5_path, name, kind in layout}
            absent = [h5_path for h5_path in known if h5_path not in set(datasets)]
            if absent:
                raise file_error(path, f"has no {absent[0]} ({known[absent[0]][0]}; "
                                       f"{len(absent)} of {len(known)} weights absent): not "
                                       f"the layout of keras-hub {LAYOUT_VERSION}'s "
                                       f"{task if file_name == TASK_WEIGHTS_FILE else BACKBONE}")
            for h5_path in datasets:
                if h5_path.startswith("optimizer/"):
                    continue
                name, kind = known.get(h5_path, (f"{file_name}:{h5_path}", SAME))
                shape = tuple(h5[h5_path].shape)
                if kind == TRANSPOSE:
                    shape = shape[::-1]
                elif kind == HEADS:
                    shape = shape[:-2] + (int(np.prod(shape[-2:])),)
                elif kind == HEADS_IN:
                    shape = (int(np.prod(shape[:2])),) + shape[2:]
                if kind in (HEADS, HEADS_IN):
                    try:
                        expected = to_keras(np.zeros(shape, np.int8), kind, config).shape
                    except ValueError:  # not heads * head_size
                        expected = "?"
                    if tuple(h5[h5_path].shape) != expected:
                        raise file_error(path, f"{h5_path} has shape {list(h5[h5_path].shape)}, "
                                               f"not {expected} ({name} in "
                                               f"{config.num_attention_heads} heads of "
                                               f"config.json)")
                self.sources[name] = (file_name, h5_path, kind, shape)

    def __contains__(self, name):
        return name in self.sources

    def __iter__(self):
        return iter(self.sources)

    def shape(self, name):
        return self.sources[name][3]

    def __getitem__(self, name):
        file_name, h5_path, kind, shape = self.sources[name]
        return to_original(np.asarray(self.files[file_name][h5_path]), kind, shape)
