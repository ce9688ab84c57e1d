"""The task names that every command line, the Python API and export use, and their classes.

A task class registers itself where it is defined (`@register("classifier")`); `PACKAGES` says
which package of bert_tf.tasks defines each name, imported when the name is asked for, so that
the names are known without importing TensorFlow (export_savedmodel's --task).
`build(name, bert_config, **options)` makes the task of a model that is loaded rather than
trained here (export_savedmodel, `bert_tf.api.load_model`): its config (`Task.Config`) with
`options` as fields and no records. An option the task's config lacks is an error.
"""
import dataclasses
import importlib

from bert_tf.errors import InputError

# name -> the package of bert_tf.tasks whose `task` module registers it.
PACKAGES = {
    "encoder": "encoder",
    "pretraining": "pretraining",
    "classifier": "classification",
    "squad": "squad",
    "ner": "ner",
    "multiple_choice": "multiple_choice",
}
NAMES = tuple(PACKAGES)
_CLASSES = {}


def register(name):
    """Class decorator: the Task class of `name` (one of NAMES)."""
    if name not in PACKAGES:
        raise ValueError(f"task {name!r} is not in bert_tf.tasks.registry.PACKAGES")

    def add(cls):
        _CLASSES[name] = cls
        return cls

    return add


def task_class(name):
    """The Task class registered as `name`; InputError naming the valid names otherwise."""
    if name not in PACKAGES:
        raise InputError(f"unknown task {name!r}: one of {', '.join(NAMES)}")
    if name not in _CLASSES:
        importlib.import_module(f"bert_tf.tasks.{PACKAGES[name]}.task")
    return _CLASSES[name]


def build(name, bert_config, **options):
    """The task `name` for a given model: its `Config(bert_config=..., **options)` (labels,
    max_seq_length and the task's serving options)."""
    cls = task_class(name)
    fields = {field.name for field in dataclasses.fields(cls.Config)} - {"bert_config",
                                                                         "records"}
    unknown = sorted(set(options) - fields)
    if unknown:
        raise InputError(f"task {name} has no option {', '.join(unknown)}: its options are "
                         f"{', '.join(sorted(fields))}")
    return cls(cls.Config(bert_config=bert_config, **options))
