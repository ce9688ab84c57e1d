"""export_savedmodel --format=keras_hub: a keras-hub preset directory.

What `keras_hub.models.BertBackbone.from_preset(export_dir)` (and BertTextClassifier,
BertMaskedLM, BertTokenizer) loads, as keras-hub 0.32's `save_to_preset` writes it:
config.json (the BertBackbone), model.weights.h5 (its weights), tokenizer.json and
assets/tokenizer/vocabulary.txt (the BertTokenizer: the vocabulary, the casing), metadata.json;
for task classifier also task.json, task.weights.h5 and preprocessor.json of a
BertTextClassifier (its `logits` Dense: run_classifier's head; logits, as ours), for task
pretraining those of a BertMaskedLM (the masked-LM head; keras-hub has no next-sentence head,
which is left out). The preset also holds our bert_tf_model.json (the task and its labels, as a
training run records them: bert_tf.model.directory) and the export's marker. The weights are
written with h5py in Keras 3's layout
(bert_tf.model.keras_hub_preset: the table between the two namings); keras-hub is not needed.

What keras-hub cannot express is refused before any work (`check_model`): tasks other than
encoder, classifier and pretraining; an activation other than the original's tanh GELU
(keras-hub's BertBackbone computes that one); a vocabulary without the special tokens its
BertTokenizer requires. keras-hub's BertMaskedLM head applies exact GELU and LayerNorm epsilon
1e-5 where the original's applies its tanh GELU and 1e-12: the backbone's outputs are ours, the
masked-LM logits differ slightly (`MASKED_LM_NOTE`, printed on export).
"""
import datetime
import io
import json
import os

import h5py
import keras
import numpy as np
import tensorflow as tf

from bert_tf.errors import arg, argument_error
from bert_tf.io_utils import atomic_output
from bert_tf.model import directory
from bert_tf.model import keras_hub_preset as preset
from bert_tf.model.checkpoints import original_weights
from bert_tf.serving.export_folders import check_export_dir, write_marker
from bert_tf.serving.vocabulary import check_special_tokens
from bert_tf.text.vocabulary import vocab_lines

TASKS = ("encoder",) + tuple(preset.TASK_CLASSES)
MASKED_LM_NOTE = ("keras-hub's BertMaskedLM head applies exact GELU and LayerNorm epsilon 1e-5 "
                  "(the original's: tanh GELU, 1e-12): its masked-LM logits differ slightly "
                  "from ours; the backbone's outputs are the same")
NEXT_SENTENCE_NOTE = ("keras-hub has no next-sentence head: cls/seq_relationship is left out "
                      "(BertMaskedLM holds the masked-LM head)")
# A task's compiled optimizer state, as keras-hub's save_task_weights writes it (Adam's
# iteration count and learning rate, keras-hub's default 5e-5): with it, loading the task's
# weights finds every object it looks for.
_OPTIMIZER_VARS = (np.int64(0), np.float32(5e-5))


def check_task(task_name):
    """InputError naming `task` for a task keras-hub has no class for."""
    if task_name not in TASKS:
        raise argument_error("task", f"keras-hub's BERT has BertBackbone, BertTextClassifier "
                                     f"and BertMaskedLM only: {arg('format')}=keras_hub exports "
                                     f"tasks {', '.join(TASKS)}, not {task_name}")


def check_model(task_name, config, vocab_file):
    """Before any work: InputError naming `task`, `format` or `vocab_file` when keras-hub
    cannot express the task, the config (`config`: a BertConfig) or the vocabulary."""
    check_task(task_name)
    if config.hidden_act != "gelu":
        raise argument_error("format", f"keras-hub's BertBackbone computes the original's tanh "
                                       f"GELU (hidden_act gelu), not this model's hidden_act "
                                       f"{config.hidden_act}: its outputs would differ")
    if not vocab_file:
        raise argument_error("vocab_file", "the keras-hub tokenizer needs the vocabulary")
    tokens = vocabulary_tokens(vocab_file)
    check_special_tokens(vocab_file, tokens, "keras-hub's BertTokenizer")
    seen = set()
    for line, token in enumerate(tokens, 1):
        if token == "" or token in seen:
            what = repr(token) + " again" if token else "an empty token"
            raise argument_error("vocab_file", f"{vocab_file} line {line}: {what}, which "
                                               f"keras-hub's tokenizer cannot number as the "
                                               f"original's does")
        seen.add(token)


def vocabulary_tokens(vocab_file):
    """The vocabulary's lines as the original's load_vocab reads them (a token's id is its
    line's index when no token repeats)."""
    return [line.decode("utf-8") for line in vocab_lines(vocab_file)]


def _serialized(module, class_name, config, name):
    """A Keras object's JSON config as keras.saving.serialize_keras_object writes it (less
    compile and build configs, as keras-hub's presets have them)."""
    return {"module": f"keras_hub.src.models.bert.{module}", "class_name": class_name,
            "config": dict({"name": name, "trainable": True, "dtype": _dtype(
                "int32" if class_name == "BertTokenizer" else "float32")}, **config),
            "registered_name": f"keras_hub>{class_name}"}


def _dtype(name):
    return {"module": "keras", "class_name": "DTypePolicy", "config": {"name": name},
            "registered_name": None}


def backbone_config(config):
    """config.json: the BertBackbone of a BertConfig (one dropout rate: the hidden one)."""
    return _serialized("bert_backbone", "BertBackbone", {
        "vocabulary_size": config.vocab_size, "num_layers": config.num_hidden_layers,
        "num_heads": config.num_attention_heads, "hidden_dim": config.hidden_size,
        "intermediate_dim": config.intermediate_size, "dropout": config.hidden_dropout_prob,
        "max_sequence_length": config.max_position_embeddings,
        "num_segments": config.type_vocab_size}, "bert_backbone")


def tokenizer_config(do_lower_case):
    """tokenizer.json: the original's uncased tokenizer lower-cases and strips accents, its
    cased one does neither."""
    return _serialized("bert_tokenizer", "BertTokenizer", {
        "config_file": preset.TOKENIZER_FILE, "vocabulary": None, "sequence_length": None,
        "lowercase": bool(do_lower_case), "strip_accents": bool(do_lower_case), "split": True,
        "suffix_indicator": "##", "oov_token": "[UNK]", "special_tokens": None,
        "special_tokens_in_strings": False}, "bert_tokenizer")


def preprocessor_config(task_class, do_lower_case, sequence_length):
    """preprocessor.json of a task (its tokenizer, packing to `sequence_length`)."""
    if task_class == "BertTextClassifier":
        module, name, extra = ("bert_text_classifier_preprocessor",
                               "BertTextClassifierPreprocessor", {})
    else:
        module, name, extra = ("bert_masked_lm_preprocessor", "BertMaskedLMPreprocessor",
                               {"mask_selection_rate": 0.15, "mask_selection_length": 96,
                                "mask_token_rate": 0.8, "random_token_rate": 0.1})
    return _serialized(module, name, dict({
        "tokenizer": tokenizer_config(do_lower_case), "config_file": preset.PREPROCESSOR_FILE,
        "sequence_length": sequence_length, "truncate": "round_robin"}, **extra), module)


def task_config(task_class, config, do_lower_case, sequence_length, num_classes=None):
    """task.json: the task with its backbone and preprocessor (a task's config has no
    trainable or dtype keys of its own)."""
    module = "bert_text_classifier" if task_class == "BertTextClassifier" else "bert_masked_lm"
    values = {"backbone": backbone_config(config),
              "preprocessor": preprocessor_config(task_class, do_lower_case, sequence_length),
              "name": module}
    if task_class == "BertTextClassifier":
        values.update(num_classes=num_classes, activation="linear",
                      dropout=config.hidden_dropout_prob)
    return {"module": f"keras_hub.src.models.bert.{module}", "class_name": task_class,
            "config": values, "registered_name": f"keras_hub>{task_class}"}


def _group(h5, path, name):
    """The layer group `path` with its vars/ group named `name` (Keras' metadata)."""
    group = h5.require_group(f"{path}/vars" if path else "vars")
    group.attrs["name"] = name
    return group


def _backbone_groups(num_layers):
    """(layer group path, Keras layer name) of every layer of a BertBackbone, variables or
    not: the groups Keras writes."""
    groups = [("", "bert_backbone"), ("layers/input_layer", "token_ids"),
              ("layers/input_layer_1", "segment_ids"), ("layers/input_layer_2", "padding_mask"),
              ("layers/reversible_embedding", "token_embedding"),
              ("layers/position_embedding", "position_embedding"),
              ("layers/embedding", "segment_embedding"), ("layers/add", "embeddings_add"),
              ("layers/layer_normalization", "embeddings_layer_norm"),
              ("layers/dropout", "embeddings_dropout"), ("layers/dense", "pooled_dense")]
    for i in range(num_layers):
        layer, suffix = preset.transformer_layer_group(i), f"_{i}" if i else ""
        attention = f"{layer}/_self_attention_layer"
        groups += [(layer, f"transformer_layer_{i}"), (attention, "self_attention_layer"),
                   (f"{attention}/query_dense", "query"), (f"{attention}/key_dense", "key"),
                   (f"{attention}/value_dense", "value"),
                   (f"{attention}/output_dense", "attention_output"),
                   (f"{attention}/_softmax", f"softmax{suffix}"),
                   (f"{attention}/_dropout_layer", f"dropout{suffix}"),
                   (f"{layer}/_self_attention_layer_norm", "self_attention_layer_norm"),
                   (f"{layer}/_self_attention_dropout", "self_attention_dropout"),
                   (f"{layer}/_feedforward_intermediate_dense", "feedforward_intermediate_dense"),
                   (f"{layer}/_feedforward_output_dense", "feedforward_output_dense"),
                   (f"{layer}/_feedforward_layer_norm", "feedforward_layer_norm"),
                   (f"{layer}/_feedforward_dropout", "feedforward_dropout")]
    return groups


def _task_groups(task_class):
    """(layer group path, Keras name) of a task's own layers and objects (its backbone's are in
    model.weights.h5)."""
    if task_class == "BertTextClassifier":
        return [("", "bert_text_classifier"), ("layers/dense", "logits"),
                ("layers/dropout", "classifier_dropout"),
                ("preprocessor", "bert_text_classifier_preprocessor"),
                ("preprocessor/tokenizer", "bert_tokenizer"), ("optimizer", "adam")]
    head = "layers/masked_lm_head"
    return [("", "bert_masked_lm"), ("layers/input_layer_3", "mask_positions"),
            (head, "mlm_head"), (f"{head}/_intermediate_dense", "intermediate_dense"),
            (f"{head}/_intermediate_layer_norm", "intermediate_layer_norm"),
            ("preprocessor", "bert_masked_lm_preprocessor"),
            ("preprocessor/tokenizer", "bert_tokenizer"), ("optimizer", "adam")]


def weights_file(groups, layout, weights, config, optimizer=False):
    """The bytes of a Keras 3 .weights.h5 file: the layer `groups`, and each (HDF5 path,
    original name, how) of `layout` from `weights` ({original name: array})."""
    buffer = io.BytesIO()
    with h5py.File(buffer, "w") as h5:
        for path, name in groups:
            _group(h5, path, name)
        for path, name, kind in layout:
            h5.create_dataset(path, data=preset.to_keras(
                np.asarray(weights[name], np.float32), kind, config))
        if optimizer:
            for i, value in enumerate(_OPTIMIZER_VARS):
                h5.create_dataset(f"optimizer/vars/{i}", data=value)
    return buffer.getvalue()


def _write(path, data):
    mode = "wb" if isinstance(data, bytes) else "w"
    with tf.io.gfile.GFile(path, mode) as f:
        f.write(data)


def _json(value):
    return json.dumps(value, indent=4)


def save(task, model, export_dir, vocab_file, do_lower_case=True, log=print):
    """Writes `task`'s `model` (a BertEncoder, BertClassifier or BertPretrainer) to export_dir
    as a keras-hub preset (see the module docstring), under a temporary name renamed when
    complete. `export_dir` must be new, empty or an earlier export (`check_export_dir`)."""
    check_export_dir(export_dir)
    config = task.config.bert_config
    check_model(task.name, config, vocab_file)
    weights = original_weights(model)
    task_class = preset.TASK_CLASSES.get(task.name)
    backbone = preset.backbone_layout(config.num_hidden_layers)
    files = {preset.CONFIG_FILE: _json(backbone_config(config)),
             preset.MODEL_WEIGHTS_FILE: weights_file(_backbone_groups(config.num_hidden_layers),
                                                     backbone, weights, config),
             preset.TOKENIZER_FILE: _json(tokenizer_config(do_lower_case)),
             preset.VOCABULARY_FILE: "".join(t + "\n" for t in vocabulary_tokens(vocab_file)),
             preset.METADATA_FILE: _json({
                 "keras_version": keras.version(), "keras_hub_version": preset.LAYOUT_VERSION,
                 "parameter_count": int(sum(np.size(weights[n]) for _, n, _ in backbone)),
                 "date_saved": datetime.datetime.now().strftime("%Y-%m-%d@%H:%M:%S"),
                 "tasks": ["MaskedLM", "TextClassifier", "TextEmbedder"]})}
    notes = []
    if task_class is not None:
        num_classes = (np.shape(weights["output_bias"])[0]
                       if task_class == "BertTextClassifier" else None)
        sequence_length = task.config.max_seq_length
        files[preset.TASK_CONFIG_FILE] = _json(task_config(task_class, config, do_lower_case,
                                                           sequence_length, num_classes))
        files[preset.PREPROCESSOR_FILE] = _json(preprocessor_config(task_class, do_lower_case,
                                                                    sequence_length))
        files[preset.TASK_WEIGHTS_FILE] = weights_file(
            _task_groups(task_class), preset.task_layout(task_class), weights, config,
            optimizer=True)
        if task_class == "BertMaskedLM":
            notes.append(MASKED_LM_NOTE)
            if "cls/seq_relationship/output_weights" in weights:
                notes.append(NEXT_SENTENCE_NOTE)
    description = {"task": task.name, "format": "keras_hub",
                   "keras_hub_class": task_class or preset.BACKBONE}
    with atomic_output(export_dir) as tmp:
        tf.io.gfile.makedirs(os.path.join(tmp, os.path.dirname(preset.VOCABULARY_FILE)))
        for name, data in files.items():
            _write(os.path.join(tmp, name), data)
        # The task, its labels and options, as a training run records them: the preset is a
        # model directory of ours too (--init_checkpoint=export_dir needs no --label_list).
        record = directory.task_record(task, do_lower_case, vocab_file)
        if task_class == "BertMaskedLM":
            record["objective"] = "mlm"  # the masked-LM head alone
        directory.write_record(tmp, record)
        write_marker(tmp, description, marker_folder="")
    for note in notes:
        log(note)
    log(f"exported {export_dir}: a keras-hub preset of {task_class or preset.BACKBONE} "
        f"(keras_hub.models.{task_class or preset.BACKBONE}.from_preset)")
    return export_dir
