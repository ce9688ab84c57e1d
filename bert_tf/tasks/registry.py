"""The task names that every command line, the Python API and export use, and their classes.

`build(name, bert_config, ...)` makes the task of a model that is loaded rather than trained
here (export_savedmodel, `bert_tf.api.load_model`): no records, only what serving needs. A new
task is one more entry (its module and class, which implements `for_model`).
"""
import importlib

from bert_tf.errors import InputError

_TASKS = {
    "encoder": ("bert_tf.tasks.encoder", "EncoderTask"),
    "pretraining": ("bert_tf.tasks.pretraining", "PretrainingTask"),
    "classifier": ("bert_tf.tasks.classification", "ClassificationTask"),
    "squad": ("bert_tf.tasks.squad", "SquadTask"),
    "ner": ("bert_tf.tasks.tagging", "TaggingTask"),
}
NAMES = tuple(_TASKS)


def task_class(name):
    """The Task class registered as `name`; InputError naming the valid names otherwise."""
    if name not in _TASKS:
        raise InputError(f"unknown task {name!r}: one of {', '.join(NAMES)}")
    module, cls = _TASKS[name]
    return getattr(importlib.import_module(module), cls)


def build(name, bert_config, **options):
    """The task `name` for a given model (`Task.for_model(bert_config, **options)`: labels,
    max_seq_length and the task's serving options)."""
    return task_class(name).for_model(bert_config, **options)
