"""What loading a checkpoint into a model did (`LoadReport`), and the rules on it: the model's
config must describe the checkpoint's encoder layers (`check_config_describes`), and a model
used for inference must be complete (`require_complete`). bert_tf.model.checkpoints makes the
reports; every command line and the API read them through these rules.
"""
import dataclasses
import re

from bert_tf.errors import argument_error, file_error


@dataclasses.dataclass
class LoadReport:
    """What `load_checkpoint` did. Names are the original (TF1) names of our variables, and the
    checkpoint's own names for `unused`; `skipped` counts optimizer slots and step counters."""
    path: str
    format: str
    loaded: list
    new: list
    unused: list
    skipped: int = 0
    # Of `new`, what the model's outputs never read (the pooler of a head on the sequence
    # output: Hugging Face's BertForTokenClassification, BertForQuestionAnswering and
    # BertForMaskedLM have none): not required by `require_complete`.
    unread: list = dataclasses.field(default_factory=list)

    # Of `unused`, the variables of encoder layers the model does not have: none in a model
    # whose config describes the checkpoint (`check_config_describes`).
    unused_layers: list = dataclasses.field(default_factory=list)

    def __str__(self):
        lines = [f"checkpoint {self.path} ({self.format}): {len(self.loaded)} variables loaded, "
                 f"{len(self.new)} new, {len(self.unused)} unused, {self.skipped} optimizer/step "
                 f"entries skipped"]
        if self.new:
            lines.append("  new (initialised, not in the checkpoint): " + ", ".join(self.new))
        for why, names in unused_groups(self.unused).items():
            lines.append(f"  unused, {why}: " + ", ".join(names))
        return "\n".join(lines)


# What a checkpoint may hold that a model leaves unused, by a name's part (the original's
# names, our TF2 checkpoints' attribute paths, Hugging Face's), and why it is left.
_UNUSED_KINDS = (
    (("cls/predictions/", "masked_lm/", "cls.predictions."),
     "the masked-LM head (pretraining's; this model has none)"),
    (("cls/seq_relationship/", "next_sentence/", "cls.seq_relationship."),
     "the next-sentence head (pretraining's; this model has none)"),
)


def unused_groups(names):
    """{why: names} of a checkpoint's unused variables: the pretraining heads, or else
    another task's head (or any other variable this model has no place for)."""
    groups = {}
    for name in names:
        why = next((why for parts, why in _UNUSED_KINDS if any(p in name for p in parts)),
                   "another task's head, or not a variable of this model")
        groups.setdefault(why, []).append(name)
    return groups


_LAYER = re.compile(r"(?:^|/)layer_(\d+)/")


def encoder_layers(names):
    """The layer numbers that variable names (original names or TF2 paths) hold."""
    return {int(m.group(1)) for m in map(_LAYER.search, names) if m}


def _as_layer_0(name):
    """A layer's variable name with its layer number 0: the same for every layer."""
    return _LAYER.sub(lambda m: m.group(0).replace(m.group(1), "0"), name, count=1)


def unused_layer_variables(unused, layer_names):
    """Of a checkpoint's `unused` names, those of an encoder layer the model does not have:
    a variable of one of its layers (`layer_names`) under another layer number. Other state
    a checkpoint may carry (moving averages, a fork's optimizer slots) is not one."""
    model_parts = {_as_layer_0(name) for name in layer_names if _LAYER.search(name)}
    return [name for name in unused if _LAYER.search(name) and _as_layer_0(name) in model_parts]


def check_config_describes(report, config_beside=None):
    """InputError naming the checkpoint when the model's config describes another number of
    encoder layers than the checkpoint holds (layers it leaves unused, or lacks), and the
    config beside the checkpoint (`config_beside()`: its (path, BertConfig), or None) when
    that is the config that says so. Every shape may agree: a layer count edited in
    config.json would otherwise give a model that runs and is silently wrong."""
    held = encoder_layers(report.loaded + report.unused_layers)
    described = encoder_layers(report.loaded + report.new)
    if held == described:
        return
    found = config_beside() if config_beside is not None else None
    config_file = found[0] if found and found[1].num_hidden_layers == len(described) else None
    raise layer_count_error(report.path, len(held), len(described), config_file)


def layer_count_error(path, held, described, config_file=None):
    return file_error(path, f"holds {held} encoder layers but the model's config"
                            + (f" ({config_file})" if config_file else "")
                            + f" describes {described} (num_hidden_layers): the config does "
                              f"not describe these weights (use the checkpoint's own config)")


def require_complete(report, argument=None, what="model", hint=""):
    """InputError when the checkpoint of `report` lacked some of the model's variables (e.g. a
    task head; what its outputs never read, `report.unread`, may be missing): naming `argument`
    (the one that gave the checkpoint) or else the checkpoint."""
    missing = [name for name in report.new if name not in report.unread]
    if not missing:
        return
    message = f"has no {missing[0]} ({len(missing)} variables of the {what} missing){hint}"
    if argument:
        raise argument_error(argument, f"{report.path} {message}")
    raise file_error(report.path, message)
