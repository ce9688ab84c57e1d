"""Atomic output: write under a temporary name, rename when complete.

A job killed half-way leaves no truncated file under the final name (at most a `*.tmp-*` file
beside it), so a rerun or a downstream reader never mistakes a partial file for a finished one.
"""
import contextlib
import os
import uuid

import tensorflow as tf


def temporary_path(path):
    """A unique temporary name in the same directory (so the final rename is atomic)."""
    return f"{path}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"


@contextlib.contextmanager
def atomic_output(path):
    """Yields a temporary path to write; renames it to `path` only if the block succeeds.

    Works for local paths and any tf.io.gfile file system (gs:// etc.).
    """
    parent = os.path.dirname(path)
    if parent:
        tf.io.gfile.makedirs(parent)
    tmp = temporary_path(path)
    try:
        yield tmp
        tf.io.gfile.rename(tmp, path, overwrite=True)
    finally:
        if tf.io.gfile.exists(tmp):
            tf.io.gfile.remove(tmp)


@contextlib.contextmanager
def atomic_open(path, mode="w"):
    """Opens a temporary file for writing; it becomes `path` only when the block succeeds."""
    with atomic_output(path) as tmp:
        with tf.io.gfile.GFile(tmp, mode) as f:
            yield f
