"""The task names that every command line, the Python API and export use, and their classes.

`build(name, bert_config, **options)` makes the task of a model that is loaded rather than
trained here (export_savedmodel, `bert_tf.api.load_model`): its config (`Task.Config`) with
`options` as fields and no records, so only what serving needs. An option the task's config
does not have is an error, not ignored. A new task is one more entry (its module and class).
"""
import dataclasses
import importlib

from bert_tf.errors import InputError

_TASKS = {
    "encoder": ("bert_tf.tasks.encoder.task", "EncoderTask"),
    "pretraining": ("bert_tf.tasks.pretraining.task", "PretrainingTask"),
    "classifier": ("bert_tf.tasks.classification.task", "ClassificationTask"),
    "squad": ("bert_tf.tasks.squad.task", "SquadTask"),
    "ner": ("bert_tf.tasks.ner.task", "TaggingTask"),
    "multiple_choice": ("bert_tf.tasks.multiple_choice.task", "MultipleChoiceTask"),
}
NAMES = tuple(_TASKS)


def task_class(name):
    """The Task class registered as `name`; InputError naming the valid names otherwise."""
    if name not in _TASKS:
        raise InputError(f"unknown task {name!r}: one of {', '.join(NAMES)}")
    module, cls = _TASKS[name]
    return getattr(importlib.import_module(module), cls)


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
