"""A task's train, dev and test files in a data directory, read into its examples.

The original's reader interface (`get_train_examples(data_dir)`, `get_dev_examples`,
`get_test_examples`) over one method, `read_split(data_dir, split)`, and the files' names: the
user's, or the reader's defaults.
"""
import os

from bert_tf.data.tsv import refuse_options
from bert_tf.errors import argument_error


class SplitFiles:
    """Base of the readers of a task's split files. Subclasses implement
    `read_split(data_dir, split)` ("train", "dev" or "test") and may set
    `default_file_names`; `file_names` are the user's files (set by `set_file_names`), {} for
    a task with fixed files."""
    default_file_names = {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"}
    file_names = {}

    def set_file_names(self, train_file=None, dev_file=None, test_file=None):
        """The user's file names (None: the reader's default)."""
        given = {"train": train_file, "dev": dev_file, "test": test_file}
        self.file_names = {split: name or self.default_file_names[split]
                           for split, name in given.items()}

    def path(self, data_dir, split):
        return os.path.join(os.fspath(data_dir), self.file_names[split])

    def get_train_examples(self, data_dir):
        """Gets a collection of examples for the train set."""
        return self.read_split(data_dir, "train")

    def get_dev_examples(self, data_dir):
        """Gets a collection of examples for the dev set."""
        return self.read_split(data_dir, "dev")

    def get_test_examples(self, data_dir):
        """Gets a collection of examples for prediction."""
        return self.read_split(data_dir, "test")

    def read_split(self, data_dir, split):
        raise NotImplementedError()


def task_key(task_name):
    """A task's name as the registries of readers key it: case and surrounding space
    ignored."""
    return (task_name or "").strip().lower()


def reader_by_name(readers, task_name, options, options_class, what="task"):
    """The reader of task `task_name` (case-insensitive) among `readers` ({name: class}).

    A class that `reads_user_files` is built with `options` (`options_class`'s arguments,
    which describe the user's files); a named task has fixed files and columns: options left
    at their defaults (or None) are ignored, any other value is an error naming it (rather than
    silently unused).
    """
    name = task_key(task_name)
    if name not in readers:
        raise argument_error("task_name", f"unknown {what} {task_name!r}; valid names: "
                                          f"{', '.join(sorted(readers))}")
    if readers[name].reads_user_files:
        return readers[name](**options)
    refuse_options(name, options_class, options)
    return readers[name]()
