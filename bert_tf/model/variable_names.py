"""The original (TF1) name of every model variable, and Hugging Face's names mapped to them.

Each model declares its variables under the original names (`original_variable_parts()`, built
from `encoder_parts`, `projection_parts` and `pretraining_head_parts`); `original_variable_map`
is the single table that loading and writing weights and the original's Adam moments use
(bert_tf.model.checkpoints, the pretraining task). `hf_to_original_name` renames a Hugging Face
BERT parameter.
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


# Hugging Face BERT parameter names -> original names. Dense weights are [out, in] (transposed).
_HF_RULES = [
    (r"embeddings\.word_embeddings\.weight", "bert/embeddings/word_embeddings", False),
    (r"embeddings\.position_embeddings\.weight", "bert/embeddings/position_embeddings", False),
    (r"embeddings\.token_type_embeddings\.weight", "bert/embeddings/token_type_embeddings", False),
    (r"embeddings\.LayerNorm\.(weight|gamma)", "bert/embeddings/LayerNorm/gamma", False),
    (r"embeddings\.LayerNorm\.(bias|beta)", "bert/embeddings/LayerNorm/beta", False),
    (r"encoder\.layer\.(\d+)\.attention\.self\.(query|key|value)\.weight",
     r"bert/encoder/layer_\1/attention/self/\2/kernel", True),
    (r"encoder\.layer\.(\d+)\.attention\.self\.(query|key|value)\.bias",
     r"bert/encoder/layer_\1/attention/self/\2/bias", False),
    (r"encoder\.layer\.(\d+)\.(attention\.output|intermediate|output)\.dense\.weight",
     r"bert/encoder/layer_\1/\2/dense/kernel", True),
    (r"encoder\.layer\.(\d+)\.(attention\.output|intermediate|output)\.dense\.bias",
     r"bert/encoder/layer_\1/\2/dense/bias", False),
    (r"encoder\.layer\.(\d+)\.(attention\.output|output)\.LayerNorm\.(weight|gamma)",
     r"bert/encoder/layer_\1/\2/LayerNorm/gamma", False),
    (r"encoder\.layer\.(\d+)\.(attention\.output|output)\.LayerNorm\.(bias|beta)",
     r"bert/encoder/layer_\1/\2/LayerNorm/beta", False),
    (r"pooler\.dense\.weight", "bert/pooler/dense/kernel", True),
    (r"pooler\.dense\.bias", "bert/pooler/dense/bias", False),
    (r"cls\.predictions\.transform\.dense\.weight", "cls/predictions/transform/dense/kernel", True),
    (r"cls\.predictions\.transform\.dense\.bias", "cls/predictions/transform/dense/bias", False),
    (r"cls\.predictions\.transform\.LayerNorm\.(weight|gamma)",
     "cls/predictions/transform/LayerNorm/gamma", False),
    (r"cls\.predictions\.transform\.LayerNorm\.(bias|beta)",
     "cls/predictions/transform/LayerNorm/beta", False),
    (r"cls\.predictions\.bias", "cls/predictions/output_bias", False),
    (r"cls\.seq_relationship\.weight", "cls/seq_relationship/output_weights", False),
    (r"cls\.seq_relationship\.bias", "cls/seq_relationship/output_bias", False),
    (r"classifier\.weight", "output_weights", False),
    (r"classifier\.bias", "output_bias", False),
    (r"qa_outputs\.weight", "cls/squad/output_weights", False),
    (r"qa_outputs\.bias", "cls/squad/output_bias", False),
]
# Buffers and tied copies that carry no weights of their own.
HF_IGNORED = re.compile(r"(embeddings\.position_ids|cls\.predictions\.decoder\.(weight|bias))$")


def hf_to_original_name(hf_name):
    """(original name, transpose?) for a Hugging Face BERT parameter, or None if not a weight."""
    name = hf_name[len("bert."):] if hf_name.startswith("bert.") else hf_name
    for pattern, replacement, transpose in _HF_RULES:
        if re.fullmatch(pattern, name):
            original = re.sub(pattern, replacement, name).replace("attention.output",
                                                                   "attention/output")
            return original, transpose
    return None
