"""Named pretraining recipes: the defaults a recipe sets for create_pretraining_data (`records`)
and for run_pretraining (`training`), each still overridable by its own argument. `original` is
the 2018 release, unchanged; docs/run_pretraining.md has the table and why each value.
No TensorFlow: create_pretraining_data imports it.
"""
import dataclasses
import math

from bert_tf.errors import argument_error


@dataclasses.dataclass(frozen=True)
class Recipe:
    """records: create_pretraining_data's arguments (its flags' names) and their values, a
    value that is a function taking the others (after the user's) and returning one; training:
    run_pretraining's, where `warmup_proportion` sets num_warmup_steps to that share of
    num_train_steps."""
    name: str
    about: str
    records: dict
    training: dict


def _predictions_for_rate(values):
    # The most a row can have masked at the rate: never a cap below the rate's count.
    return math.ceil(values["masked_lm_prob"] * values["max_seq_length"])


RECIPES = {
    "original": Recipe("original", "the 2018 release: sentence pairs, static masks, "
                                   "AdamWeightDecay", records={}, training={}),
    "efficient": Recipe(
        "efficient", "masked-LM only on full windows of every document, packed, masks drawn "
                     "at every epoch, bias-corrected Adam",
        records=dict(objective="mlm", masking="dynamic", full_windows=True, pack_sequences=True,
                     dupe_factor=1, masked_lm_prob=0.15,
                     max_predictions_per_seq=_predictions_for_rate),
        training=dict(optimizer="adam", learning_rate=1e-3, warmup_proportion=0.06)),
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
    before it."""
    values = dict(values)
    settled = {}
    for name, default in defaults.items():
        if name not in given:
            settled[name] = values[name] = default(values) if callable(default) else default
    return settled
