"""Atomic output: write under a temporary name, rename when complete.

A job killed half-way leaves no truncated file under the final name (at most a `*.tmp-*` file
beside it), so a rerun or a downstream reader never mistakes a partial file for a finished one.
Local paths use `os` (no TensorFlow import, so data tools start fast); URLs such as gs://... go
through tf.io.gfile.
"""
import contextlib
import os
import uuid

from bert_tf.errors import file_error


def is_url(path):
    return "://" in str(path)


def open_input(path, what="input file"):
    """Opens `path` for binary reading: local paths by `open`, URLs (gs://...) by tf.io.gfile.

    A missing, directory or unreadable path raises an InputError naming it and `what` it is
    ("input file", "vocabulary file", ...).
    """
    path = os.fspath(path)
    try:
        if is_url(path):
            import tensorflow as tf  # only for remote file systems

            if not tf.io.gfile.exists(path):
                raise FileNotFoundError(path)
            return tf.io.gfile.GFile(path, "rb")
        return open(path, "rb")
    except FileNotFoundError:
        raise file_error(path, f"{what} not found") from None
    except IsADirectoryError:
        raise file_error(path, f"is a directory, not a {what}") from None
    except PermissionError:
        raise file_error(path, f"{what} is not readable (permission denied)") from None


def temporary_path(path):
    """A unique temporary name in the same directory (so the final rename is atomic)."""
    return f"{path}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"


@contextlib.contextmanager
def atomic_output(path):
    """Yields a temporary path to write; renames it to `path` only if the block succeeds."""
    path = str(path)
    tmp = temporary_path(path)
    if is_url(path):
        import tensorflow as tf
        gfile = tf.io.gfile
        makedirs, exists, remove = gfile.makedirs, gfile.exists, gfile.remove
        rename = lambda src, dst: gfile.rename(src, dst, overwrite=True)  # noqa: E731
    else:
        makedirs = lambda d: os.makedirs(d, exist_ok=True)  # noqa: E731
        exists, remove, rename = os.path.exists, os.remove, os.replace
    parent = os.path.dirname(path)
    if parent:
        makedirs(parent)
    try:
        yield tmp
        rename(tmp, path)
    finally:
        if exists(tmp):
            remove(tmp)


@contextlib.contextmanager
def atomic_open(path, mode="w", encoding=None):
    """Opens a temporary file for writing; it becomes `path` only when the block succeeds."""
    with atomic_output(path) as tmp:
        if is_url(path):
            import tensorflow as tf
            with tf.io.gfile.GFile(tmp, mode) as f:
                yield f
        else:
            if "b" not in mode and encoding is None:
                encoding = "utf-8"
            with open(tmp, mode, encoding=encoding) as f:
                yield f
