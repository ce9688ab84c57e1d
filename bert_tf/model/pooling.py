"""Sentence embeddings: one vector per text pooled from the encoder's hidden states.

`pool(hidden_states, input_mask, pooling, normalize)` is the one pooling of the library:
extract_features' `--pooling` (bert_tf.tasks.encoder.extraction) and the encoder export's
`embed_text` signature (bert_tf.tasks.encoder.task) both call it. The modes are
sentence-transformers' (its `models.Pooling`), so that a sentence-transformers model directory gives
its own embeddings:
  - "cls": the hidden state at [CLS] (position 0; not the pooler's tanh layer, which is the
    encoder's `pooled_output`);
  - "mean": the mean over the real tokens (input_mask 1: [CLS] and [SEP] included, padding
    not), the sum divided by max(count, 1e-9) as sentence-transformers divides;
  - "max": the element-wise maximum over the real tokens (padding set to -1e9 first, as
    sentence-transformers does).
`normalize` then divides by the L2 norm (at least 1e-12, torch's F.normalize): the
`models.Normalize` module a sentence-transformers directory may list in its modules.json.
Computed in float32 whatever the model's compute dtype.

`sentence_transformers_config(directory)` reads what such a directory declares (modules.json,
1_Pooling/config.json, sentence_bert_config.json), which the command lines use as defaults.
"""
import dataclasses
import json
import os

import tensorflow as tf

from bert_tf.errors import argument_error, file_error

POOLINGS = ("cls", "mean", "max")


def check_pooling(pooling, name="pooling"):
    """InputError naming the argument for a pooling that is not one of POOLINGS (None: no
    pooling, allowed)."""
    if pooling is not None and pooling not in POOLINGS:
        raise argument_error(name, f"unknown pooling {pooling!r}: one of {', '.join(POOLINGS)}")
    return pooling


def pool(hidden_states, input_mask, pooling, normalize=False):
    """[B, T, H] hidden states and their [B, T] input mask -> [B, H] float32 embeddings (see
    the module docstring); TensorFlow ops, for graphs and eager calls alike."""
    check_pooling(pooling)
    if pooling is None:
        raise argument_error("pooling", f"required: one of {', '.join(POOLINGS)}")
    hidden_states = tf.cast(hidden_states, tf.float32)
    mask = tf.cast(input_mask, tf.float32)[:, :, None]  # [B, T, 1]
    if pooling == "cls":
        pooled = hidden_states[:, 0]
    elif pooling == "mean":
        total = tf.reduce_sum(hidden_states * mask, axis=1)
        pooled = total / tf.maximum(tf.reduce_sum(mask, axis=1), 1e-9)
    else:
        pooled = tf.reduce_max(tf.where(mask > 0, hidden_states, -1e9), axis=1)
    if normalize:
        norm = tf.norm(pooled, axis=-1, keepdims=True)
        pooled = pooled / tf.maximum(norm, 1e-12)
    return pooled


@dataclasses.dataclass(frozen=True)
class SentenceTransformersConfig:
    """What a sentence-transformers model directory declares.

    Attributes:
      pooling: its Pooling module's mode as one of POOLINGS, or None (a mode we lack, such as
        mean_sqrt_len or weightedmean, or no Pooling module).
      normalize: its modules.json lists a Normalize module after the pooling.
      max_seq_length: sentence_bert_config.json's (the pieces it keeps per text), or None.
    """
    pooling: str = None
    normalize: bool = False
    max_seq_length: int = None


# sentence-transformers' 1_Pooling/config.json keys -> our modes.
_ST_MODES = {"pooling_mode_cls_token": "cls", "pooling_mode_mean_tokens": "mean",
             "pooling_mode_max_tokens": "max"}


def sentence_transformers_config(path):
    """The SentenceTransformersConfig of a model directory whose modules.json lists
    sentence-transformers modules; None for anything else (a checkpoint prefix, a plain
    Hugging Face directory). A damaged JSON file is an InputError naming it."""
    path = os.fspath(path) if path else ""
    modules_file = os.path.join(path, "modules.json")
    if not path or not os.path.isfile(modules_file):
        return None

    def read(filename):
        try:
            with open(filename, encoding="utf-8") as f:
                return json.load(f)
        except (OSError, ValueError) as e:
            raise file_error(filename, f"cannot read sentence-transformers config: {e}") from None

    modules = read(modules_file)
    if not isinstance(modules, list):
        raise file_error(modules_file, "expected a JSON list of modules")
    types = [str(module.get("type", "")) for module in modules if isinstance(module, dict)]
    pooling = None
    for module in modules:
        if isinstance(module, dict) and str(module.get("type", "")).endswith(".Pooling"):
            config_file = os.path.join(path, module.get("path", ""), "config.json")
            if os.path.isfile(config_file):
                modes = [mode for key, mode in _ST_MODES.items() if read(config_file).get(key)]
                pooling = modes[0] if len(modes) == 1 else None
            break
    max_seq_length = None
    bert_config_file = os.path.join(path, "sentence_bert_config.json")
    if os.path.isfile(bert_config_file):
        max_seq_length = read(bert_config_file).get("max_seq_length")
    return SentenceTransformersConfig(
        pooling=pooling, normalize=any(t.endswith(".Normalize") for t in types),
        max_seq_length=max_seq_length if isinstance(max_seq_length, int) else None)


def embedding_options(init_checkpoint, normalize=None, max_seq_length=None):
    """(normalize, max_seq_length) of a pooled embedding: those given (not None), else what a
    sentence-transformers directory `init_checkpoint` declares (its Normalize module, its
    sentence_bert_config's max_seq_length), else no normalization and 128 pieces, the command
    lines' default."""
    declared = sentence_transformers_config(init_checkpoint) or SentenceTransformersConfig()
    if normalize is None:
        normalize = declared.normalize
    if max_seq_length is None:
        max_seq_length = declared.max_seq_length or 128
    return normalize, max_seq_length
