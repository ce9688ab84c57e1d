"""The original (TF1) name of every model variable, and Hugging Face's names mapped to them.

Each model declares its variables under the original names (`original_variable_parts()`, built
from `encoder_parts`, `projection_parts` and `pretraining_head_parts`); `original_variable_map`
is the single table that loading and writing weights and the original's Adam moments use
(bert_tf.model.checkpoints, the pretraining task). One table of Hugging Face's names renames
both ways: `hf_to_original_name` (reading a Hugging Face directory) and `original_to_hf_name`
(writing one: bert_tf.serving.huggingface).
"""
import dataclasses
import re


@dataclasses.dataclass
class Part:
    """One original variable stored in (a slice of) one of our variables.

    `index`/`count` select an equal slice of the last axis (the fused QKV projection holds
    query, key, value as parts 0, 1, 2 of 3); None means the whole variable.
    """
    name: str
    variable: object
    index: int = None
    count: int = 1


def _dense_parts(prefix, layer):
    return [Part(prefix + "/kernel", layer.kernel), Part(prefix + "/bias", layer.bias)]


def _layer_norm_parts(prefix, layer):
    return [Part(prefix + "/beta", layer.beta), Part(prefix + "/gamma", layer.gamma)]


def encoder_parts(encoder, scope="bert"):
    """A BertEncoder's variables under the original names (scope/embeddings/..., ...)."""
    emb = encoder.embeddings
    parts = [
        Part(f"{scope}/embeddings/word_embeddings", emb.word_embeddings),
        Part(f"{scope}/embeddings/token_type_embeddings", emb.token_type_embeddings),
        Part(f"{scope}/embeddings/position_embeddings", emb.position_embeddings),
        *_layer_norm_parts(f"{scope}/embeddings/LayerNorm", emb.layer_norm),
    ]
    for i, layer in enumerate(encoder.transformer_layers):
        p = f"{scope}/encoder/layer_{i}"
        for j, qkv in enumerate(("query", "key", "value")):
            parts.append(Part(f"{p}/attention/self/{qkv}/kernel", layer.attention.qkv_kernel, j, 3))
            parts.append(Part(f"{p}/attention/self/{qkv}/bias", layer.attention.qkv_bias, j, 3))
        parts += _dense_parts(f"{p}/attention/output/dense", layer.attention_output)
        parts += _layer_norm_parts(f"{p}/attention/output/LayerNorm", layer.attention_layer_norm)
        parts += _dense_parts(f"{p}/intermediate/dense", layer.intermediate)
        parts += _dense_parts(f"{p}/output/dense", layer.output_dense)
        parts += _layer_norm_parts(f"{p}/output/LayerNorm", layer.output_layer_norm)
    parts += _dense_parts(f"{scope}/pooler/dense", encoder.pooler.dense)
    return parts


def projection_parts(prefix, projection):
    """An OutputProjection as `<prefix>output_weights` / `<prefix>output_bias` (run_classifier:
    no prefix; run_squad: cls/squad/)."""
    return [Part(prefix + "output_weights", projection.output_weights),
            Part(prefix + "output_bias", projection.output_bias)]


def pretraining_head_parts(masked_lm, next_sentence):
    """run_pretraining's heads: cls/predictions/... and cls/seq_relationship/... (none when
    `next_sentence` is None: masked-LM only)."""
    parts = _dense_parts("cls/predictions/transform/dense", masked_lm.transform.dense)
    parts += _layer_norm_parts("cls/predictions/transform/LayerNorm",
                               masked_lm.transform.layer_norm)
    parts.append(Part("cls/predictions/output_bias", masked_lm.output_bias))
    if next_sentence is None:
        return parts
    return parts + projection_parts("cls/seq_relationship/", next_sentence.projection)


def original_variable_map(model):
    """The model's variables under their original (TF1) names, as a list of Part.

    Each model declares its own names (`original_variable_parts()`, bert_tf.model.models), so a new
    task model needs no change here.
    """
    parts_of = getattr(model, "original_variable_parts", None)
    if parts_of is None:
        raise TypeError(f"{type(model).__name__} declares no original variable names "
                        f"(original_variable_parts)")
    return parts_of()


# Hugging Face BERT parameter names (below the "bert." of a task model's encoder) and the
# original names, one table read both ways: {layer} is a layer's number, {qkv} one of query,
# key, value. Dense weights are [out, in] in Hugging Face's naming (transposed: True).
_HF_NAMES = [
    ("embeddings.word_embeddings.weight", "bert/embeddings/word_embeddings", False),
    ("embeddings.position_embeddings.weight", "bert/embeddings/position_embeddings", False),
    ("embeddings.token_type_embeddings.weight", "bert/embeddings/token_type_embeddings", False),
    ("embeddings.LayerNorm.weight", "bert/embeddings/LayerNorm/gamma", False),
    ("embeddings.LayerNorm.bias", "bert/embeddings/LayerNorm/beta", False),
    ("encoder.layer.{layer}.attention.self.{qkv}.weight",
     "bert/encoder/layer_{layer}/attention/self/{qkv}/kernel", True),
    ("encoder.layer.{layer}.attention.self.{qkv}.bias",
     "bert/encoder/layer_{layer}/attention/self/{qkv}/bias", False),
    ("encoder.layer.{layer}.attention.output.dense.weight",
     "bert/encoder/layer_{layer}/attention/output/dense/kernel", True),
    ("encoder.layer.{layer}.attention.output.dense.bias",
     "bert/encoder/layer_{layer}/attention/output/dense/bias", False),
    ("encoder.layer.{layer}.attention.output.LayerNorm.weight",
     "bert/encoder/layer_{layer}/attention/output/LayerNorm/gamma", False),
    ("encoder.layer.{layer}.attention.output.LayerNorm.bias",
     "bert/encoder/layer_{layer}/attention/output/LayerNorm/beta", False),
    ("encoder.layer.{layer}.intermediate.dense.weight",
     "bert/encoder/layer_{layer}/intermediate/dense/kernel", True),
    ("encoder.layer.{layer}.intermediate.dense.bias",
     "bert/encoder/layer_{layer}/intermediate/dense/bias", False),
    ("encoder.layer.{layer}.output.dense.weight",
     "bert/encoder/layer_{layer}/output/dense/kernel", True),
    ("encoder.layer.{layer}.output.dense.bias",
     "bert/encoder/layer_{layer}/output/dense/bias", False),
    ("encoder.layer.{layer}.output.LayerNorm.weight",
     "bert/encoder/layer_{layer}/output/LayerNorm/gamma", False),
    ("encoder.layer.{layer}.output.LayerNorm.bias",
     "bert/encoder/layer_{layer}/output/LayerNorm/beta", False),
    ("pooler.dense.weight", "bert/pooler/dense/kernel", True),
    ("pooler.dense.bias", "bert/pooler/dense/bias", False),
    ("cls.predictions.transform.dense.weight", "cls/predictions/transform/dense/kernel", True),
    ("cls.predictions.transform.dense.bias", "cls/predictions/transform/dense/bias", False),
    ("cls.predictions.transform.LayerNorm.weight", "cls/predictions/transform/LayerNorm/gamma",
     False),
    ("cls.predictions.transform.LayerNorm.bias", "cls/predictions/transform/LayerNorm/beta",
     False),
    ("cls.predictions.bias", "cls/predictions/output_bias", False),
    ("cls.seq_relationship.weight", "cls/seq_relationship/output_weights", False),
    ("cls.seq_relationship.bias", "cls/seq_relationship/output_bias", False),
    ("classifier.weight", "output_weights", False),
    ("classifier.bias", "output_bias", False),
    ("qa_outputs.weight", "cls/squad/output_weights", False),
    ("qa_outputs.bias", "cls/squad/output_bias", False),
]
_FIELDS = {"layer": r"\d+", "qkv": "query|key|value"}


def _pattern(template):
    """The regular expression of a name template (its fields as named groups)."""
    parts = re.split(r"\{(\w+)\}", template)
    return re.compile("".join(re.escape(part) if i % 2 == 0 else f"(?P<{part}>{_FIELDS[part]})"
                              for i, part in enumerate(parts)))


_HF_PATTERNS = [(_pattern(hf), _pattern(original), hf, original, transpose)
                for hf, original, transpose in _HF_NAMES]
# Buffers and tied copies that carry no weights of their own.
HF_IGNORED = re.compile(r"(embeddings\.position_ids|cls\.predictions\.decoder\.(weight|bias))$")
# The encoder's scope in a Hugging Face task model (none in a BertModel).
HF_ENCODER_PREFIX = "bert."


def hf_to_original_name(hf_name):
    """(original name, transpose?) for a Hugging Face BERT parameter, or None if not a weight.
    Older files' LayerNorm.gamma / LayerNorm.beta are LayerNorm.weight / LayerNorm.bias."""
    name = hf_name[len(HF_ENCODER_PREFIX):] if hf_name.startswith(HF_ENCODER_PREFIX) else hf_name
    name = re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", name)
    name = re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", name)
    for hf_pattern, _, _, original, transpose in _HF_PATTERNS:
        match = hf_pattern.fullmatch(name)
        if match:
            return original.format(**match.groupdict()), transpose
    return None


def original_to_hf_name(original_name, encoder_prefix=HF_ENCODER_PREFIX):
    """(Hugging Face name, transpose?) of an original variable name, the encoder's under
    `encoder_prefix` ("bert." in a task model, "" in a BertModel); None for a name Hugging
    Face's BERT has no parameter for."""
    for _, original_pattern, hf, _, transpose in _HF_PATTERNS:
        match = original_pattern.fullmatch(original_name)
        if match:
            prefix = encoder_prefix if original_name.startswith("bert/") else ""
            return prefix + hf.format(**match.groupdict()), transpose
    return None
