"""Named pretraining recipes: the defaults a recipe sets for create_pretraining_data
(`data_flags`) and for run_pretraining (`training_flags`), each still overridable by its own
argument. `original` is
the 2018 release, unchanged; docs/run_pretraining.md has the table and why each value.
No TensorFlow: create_pretraining_data imports it.
"""
import dataclasses
import math

from bert_tf.errors import argument_error


@dataclasses.dataclass(frozen=True)
class Recipe:
    """data_flags: create_pretraining_data's flags and their values; training_flags:
    run_pretraining's. A value may be a function of every flag's value (`settle`)."""
    name: str
    about: str
    data_flags: dict
    training_flags: dict


def _predictions_for_rate(values):
    # The rate's count of a full row. A packed row of many short sequences may ask for more
    # (each sequence at least one), and is capped at this.
    return math.ceil(values["masked_lm_prob"] * values["max_seq_length"])


def _warmup(share):
    def num_warmup_steps(values):
        return round(share * values["num_train_steps"])
    return num_warmup_steps


# Rows in the training shuffle buffer, about 1 KB each at 128 tokens. The original's 100 over
# records written in one fixed order gives every epoch nearly the same batches; this reorders a
# small corpus whole and changes a large one's batches at every epoch.
SHUFFLE_BUFFER_ROWS = 10000


def _shuffle_buffer(values):
    # None: not set (--deterministic_input reads the records unshuffled).
    return None if values.get("deterministic_input") else SHUFFLE_BUFFER_ROWS


RECIPES = {
    "original": Recipe("original", "the 2018 release: sentence pairs, static masks, "
                                   "AdamWeightDecay", data_flags={}, training_flags={}),
    "efficient": Recipe(
        "efficient", "masked-LM only on full windows of every document, packed, masks drawn "
                     "at every epoch, bias-corrected Adam",
        data_flags=dict(objective="mlm", masking="dynamic", full_windows=True,
                        pack_sequences=True, dupe_factor=1, masked_lm_prob=0.15,
                        max_predictions_per_seq=_predictions_for_rate),
        training_flags=dict(optimizer="adam", learning_rate=1e-3,
                            num_warmup_steps=_warmup(0.10),
                            shuffle_buffer_size=_shuffle_buffer)),
}
DEFAULT_RECIPE = "original"


def recipe(name, argument="recipe"):
    """The Recipe named `name`; an unknown name is an InputError naming `argument`."""
    if name not in RECIPES:
        raise argument_error(argument, f"unknown recipe {name!r} (one of {', '.join(RECIPES)})")
    return RECIPES[name]


def settle(defaults, values, given):
    """The values the recipe sets: each name of `defaults` not in `given` (the names the user
    gave), a function called on `values` (every current value) updated with those settled
    before it; a function's None leaves its name unset."""
    values = dict(values)
    settled = {}
    for name, default in defaults.items():
        if name in given:
            continue
        value = default(values) if callable(default) else default
        if value is not None:
            settled[name] = values[name] = value
    return settled
