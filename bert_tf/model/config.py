"""BertConfig: the original release's `bert_config.json`, validated.

Same fields, defaults and JSON layout as the original `modeling.BertConfig`, so a config file is
read and written by both. Keys the original does not know are kept (and written back), so that
configs from other tools survive a round trip. Invalid values raise `InputError` naming the key
(and the file when there is one), instead of failing later deep inside a layer.

`hidden_act` follows the original's meaning: "gelu" is the tanh approximation (the original's
`gelu`). "gelu_exact" is the erf form, which Hugging Face configs call "gelu";
`from_hf_dict` translates a Hugging Face `config.json`, `to_hf_dict` writes one. Every config
file is read by `from_json_file`, which tells the two formats apart by their keys
(`is_hugging_face_config`), so a Hugging Face `config.json` passed where a `bert_config.json` is
expected keeps its meaning.
"""
import copy
import json

import tensorflow as tf

from bert_tf.errors import InputError, file_error
from bert_tf.io_utils import atomic_open

# Activations the encoder implements (bert_tf.model.activations.get_activation).
ACTIVATIONS = ("gelu", "gelu_exact", "relu", "tanh", "linear", "swish")

# Hugging Face `hidden_act` -> ours. Their "gelu" is exact erf GELU; "gelu_new" is the tanh form.
HF_ACTIVATIONS = {
    "gelu": "gelu_exact",
    "gelu_new": "gelu",
    "gelu_pytorch_tanh": "gelu",
    "gelu_fast": "gelu",
    "relu": "relu",
    "tanh": "tanh",
    "silu": "swish",
    "swish": "swish",
    "linear": "linear",
}

# Ours -> Hugging Face's `hidden_act`: the first of HF_ACTIVATIONS' names for each of ours (our
# "gelu", the tanh form, is their "gelu_new"; our "gelu_exact" their "gelu").
TO_HF_ACTIVATIONS = {}
for _hf_act, _ours in HF_ACTIVATIONS.items():
    TO_HF_ACTIVATIONS.setdefault(_ours, _hf_act)
del _hf_act, _ours

# Keys that Hugging Face's BertConfig writes and the original's bert_config.json never has:
# every config.json that transformers writes holds model_type and layer_norm_eps (and most
# transformers_version, architectures, pad_token_id); one of them is enough.
HF_ONLY_KEYS = ("model_type", "architectures", "transformers_version", "layer_norm_eps",
                "pad_token_id", "position_embedding_type", "torch_dtype", "_name_or_path")

_FIELDS = {
    # name: (default, type, check, description of the check)
    "vocab_size": (None, int, lambda v: v > 0, "a positive integer"),
    "hidden_size": (768, int, lambda v: v > 0, "a positive integer"),
    "num_hidden_layers": (12, int, lambda v: v > 0, "a positive integer"),
    "num_attention_heads": (12, int, lambda v: v > 0, "a positive integer"),
    "intermediate_size": (3072, int, lambda v: v > 0, "a positive integer"),
    "hidden_act": ("gelu", str, lambda v: v in ACTIVATIONS, "one of " + ", ".join(ACTIVATIONS)),
    "hidden_dropout_prob": (0.1, float, lambda v: 0.0 <= v < 1.0, "a number in [0, 1)"),
    "attention_probs_dropout_prob": (0.1, float, lambda v: 0.0 <= v < 1.0, "a number in [0, 1)"),
    "max_position_embeddings": (512, int, lambda v: v > 0, "a positive integer"),
    "type_vocab_size": (16, int, lambda v: v > 0, "a positive integer"),
    "initializer_range": (0.02, float, lambda v: v > 0.0, "a positive number"),
}


# Fields of training alone (dropout, initialisation): configs that differ only in these describe
# the same weights, and fine-tuning may change them.
TRAINING_FIELDS = ("hidden_dropout_prob", "attention_probs_dropout_prob", "initializer_range")


class BertConfig:
    """Configuration of a BERT encoder (the original's fields and defaults).

    Args mirror the original `modeling.BertConfig`; `**extra` keeps unknown keys.
    Raises InputError on an invalid value.
    """

    def __init__(self, vocab_size, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                 intermediate_size=3072, hidden_act="gelu", hidden_dropout_prob=0.1,
                 attention_probs_dropout_prob=0.1, max_position_embeddings=512,
                 type_vocab_size=16, initializer_range=0.02, **extra):
        values = dict(vocab_size=vocab_size, hidden_size=hidden_size,
                      num_hidden_layers=num_hidden_layers, num_attention_heads=num_attention_heads,
                      intermediate_size=intermediate_size, hidden_act=hidden_act,
                      hidden_dropout_prob=hidden_dropout_prob,
                      attention_probs_dropout_prob=attention_probs_dropout_prob,
                      max_position_embeddings=max_position_embeddings,
                      type_vocab_size=type_vocab_size, initializer_range=initializer_range)
        for key, value in values.items():
            setattr(self, key, _checked(key, value))
        if self.hidden_size % self.num_attention_heads:
            raise InputError(f"hidden_size ({self.hidden_size}) is not a multiple of "
                             f"num_attention_heads ({self.num_attention_heads})")
        self.extra = dict(extra)

    @property
    def head_size(self):
        return self.hidden_size // self.num_attention_heads

    @classmethod
    def from_dict(cls, json_object, source=None):
        """Builds a config from a dict (the JSON object); `source` names the file in errors."""
        try:
            if not isinstance(json_object, dict):
                raise InputError("a config must be a JSON object")
            if "vocab_size" not in json_object:
                raise InputError("missing required key 'vocab_size'")
            return cls(**json_object)
        except InputError as e:
            raise file_error(source, str(e)) if source else e

    @classmethod
    def from_json_file(cls, json_file, hugging_face=None):
        """Reads a config file: the original's `bert_config.json`, or a Hugging Face
        `config.json` (read by `from_hf_dict`), told apart by its keys
        (`is_hugging_face_config`) unless `hugging_face` says which (a Hugging Face
        directory's config.json). Errors name the file."""
        json_file = str(json_file)
        if not tf.io.gfile.exists(json_file):
            raise file_error(json_file, "config file not found")
        with tf.io.gfile.GFile(json_file, "r") as reader:
            text = reader.read()
        try:
            json_object = json.loads(text)
        except json.JSONDecodeError as e:
            raise file_error(json_file, f"not valid JSON: {e.msg}", e.lineno) from None
        if hugging_face or hugging_face is None and is_hugging_face_config(json_object):
            return cls.from_hf_dict(json_object, source=json_file)
        return cls.from_dict(json_object, source=json_file)

    @classmethod
    def from_hf_dict(cls, hf_object, source=None):
        """Builds a config from a Hugging Face BERT `config.json` object.

        HF "gelu" is the exact erf form (ours: "gelu_exact"); their layer_norm_eps must be the
        original's 1e-12 since our LayerNorm fixes it; a model_type other than "bert" (another
        architecture, whose weights this encoder would misread) is an error.
        """
        try:
            if not isinstance(hf_object, dict):
                raise InputError("a config must be a JSON object")
            model_type = hf_object.get("model_type", "bert")
            if model_type != "bert":
                raise InputError(f"model_type {model_type!r} is not BERT (only \"bert\" "
                                 f"configs are read)")
            if "vocab_size" not in hf_object:
                raise InputError("missing required key 'vocab_size'")
            hf_act = hf_object.get("hidden_act", "gelu")
            if hf_act not in HF_ACTIVATIONS:
                raise InputError(f"hidden_act {hf_act!r} is not supported "
                                 f"(supported: {', '.join(HF_ACTIVATIONS)})")
            eps = hf_object.get("layer_norm_eps", 1e-12)
            if abs(eps - 1e-12) > 1e-15:
                raise InputError(f"layer_norm_eps {eps} is not supported (BERT uses 1e-12)")
            keys = [k for k in _FIELDS if k != "hidden_act" and k in hf_object]
            return cls(hidden_act=HF_ACTIVATIONS[hf_act], **{k: hf_object[k] for k in keys})
        except (InputError, TypeError) as e:
            raise file_error(source, str(e)) if source else InputError(str(e))

    def to_hf_dict(self):
        """The fields as a Hugging Face BERT `config.json` object (`from_hf_dict` reads it
        back): model_type "bert", Hugging Face's name of the activation, LayerNorm's epsilon
        (1e-12, the original's); the keys of other tools are left out."""
        output = {key: getattr(self, key) for key in _FIELDS}
        output.update(model_type="bert", hidden_act=TO_HF_ACTIVATIONS[self.hidden_act],
                      layer_norm_eps=1e-12, position_embedding_type="absolute")
        return output

    def to_dict(self):
        """The JSON object: the original's keys, then any unknown keys that were read."""
        output = {key: getattr(self, key) for key in _FIELDS}
        output.update(copy.deepcopy(self.extra))
        return output

    def to_json_string(self):
        """Same formatting as the original (indent 2, sorted keys, trailing newline)."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def to_json_file(self, json_file):
        with atomic_open(json_file, "w") as writer:
            writer.write(self.to_json_string())

    def replace(self, **changes):
        """A copy with some fields changed (e.g. dropout 0 for inference)."""
        values = self.to_dict()
        values.update(changes)
        return BertConfig(**values)

    def architecture(self):
        """{field: value} of the fields that say which weights the config describes (all but
        TRAINING_FIELDS)."""
        return {key: getattr(self, key) for key in _FIELDS if key not in TRAINING_FIELDS}

    def architecture_differences(self, other):
        """[(field, self's value, other's)] of the fields (all but TRAINING_FIELDS) in which
        the two configs describe different weights; empty when they describe the same."""
        theirs = other.architecture()
        return [(key, value, theirs[key]) for key, value in self.architecture().items()
                if value != theirs[key]]

    def __eq__(self, other):
        return isinstance(other, BertConfig) and self.to_dict() == other.to_dict()

    def __repr__(self):
        return f"BertConfig({self.to_dict()})"


def is_hugging_face_config(json_object):
    """Whether a config's JSON object is a Hugging Face `config.json` (one of HF_ONLY_KEYS)
    rather than the original's `bert_config.json`."""
    return isinstance(json_object, dict) and any(key in json_object for key in HF_ONLY_KEYS)


def _checked(key, value):
    default, kind, check, requirement = _FIELDS[key]
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if isinstance(value, bool) or not isinstance(value, kind) or not check(value):
        raise InputError(f"{key} must be {requirement}, got {value!r}")
    return value


class SerializesBertConfig:
    """get_config/from_config for a Keras object built as `cls(bert_config, **kwargs)`: the
    config is stored as its dict. Mix in before the Keras base class."""

    def get_config(self):
        config = super().get_config()
        config.update(config=self.config.to_dict())
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        return cls(BertConfig.from_dict(config.pop("config")), **config)
