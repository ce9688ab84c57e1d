"""The task names that every command line, the Python API and export use, and their classes.

A task class registers itself where it is defined (`@register`, under its `name`), in the `task`
module of its package of bert_tf.tasks; the packages are found, and their task modules
imported, when a name is first asked for (`task_class`, `names`).
`build(name, bert_config, **options)` makes the task of a model that is loaded rather than
trained here (`bert_tf.api.load_model`): its config (`Task.Config`) with `options` as fields
and no records; an option the task's config lacks is an error. `build_for_serving` is
export's: the options a task has, completed from the model's files.
"""
import dataclasses
import functools
import importlib
import importlib.util
import pkgutil

import bert_tf.tasks
from bert_tf.errors import InputError, argument_error

_CLASSES = {}


def register(cls):
    """Class decorator: the Task class `cls`, under its `name`."""
    _CLASSES[cls.name] = cls
    return cls


@functools.cache
def _import_tasks():
    """Imports the `task` module of every package of bert_tf.tasks (which registers it), once."""
    for package in pkgutil.iter_modules(bert_tf.tasks.__path__):
        if package.ispkg and importlib.util.find_spec(
                f"bert_tf.tasks.{package.name}.task") is not None:
            importlib.import_module(f"bert_tf.tasks.{package.name}.task")


def names():
    """Every task name, sorted."""
    _import_tasks()
    return tuple(sorted(_CLASSES))


def task_class(name):
    """The Task class registered as `name`; InputError naming the valid names otherwise."""
    if name not in _CLASSES:
        _import_tasks()
    if name not in _CLASSES:
        raise argument_error("task", f"unknown task {name!r}: one of {', '.join(names())}")
    return _CLASSES[name]


def option_names(name):
    """The options of task `name`: its Config's fields but the model's config and records."""
    return {field.name for field in dataclasses.fields(task_class(name).Config)} - {
        "bert_config", "records"}


def build(name, bert_config, **options):
    """The task `name` for a given model: its `Config(bert_config=..., **options)` (labels,
    max_seq_length and the task's serving options)."""
    cls, known = task_class(name), option_names(name)
    unknown = sorted(set(options) - known)
    if unknown:
        raise InputError(f"task {name} has no option {', '.join(unknown)}: its options are "
                         f"{', '.join(sorted(known))}")
    return cls(cls.Config(bert_config=bert_config, **options))


def build_for_serving(name, bert_config, options, vocab_file=None, record=None):
    """The task `name` of a model exported for serving: those of `options` that it has,
    completed by its class from the model's files (`Task.serving_options`: the vocabulary;
    `record`, what the model's folder records of a run of the task)."""
    cls, known = task_class(name), option_names(name)
    options = {key: value for key, value in options.items() if key in known}
    return build(name, bert_config, **cls.serving_options(options, vocab_file, record or {}))
