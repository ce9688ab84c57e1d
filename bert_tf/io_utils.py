"""Atomic output: write under a temporary name, rename when complete.

A job killed half-way leaves no truncated file under the final name (at most a hidden
`.NAME.tmp-PID-XXXXXXXX` file beside it), so a rerun or a downstream reader never mistakes a
partial file for a finished one. Such leftovers are removed by the next write of the same output
(once their process is gone), and `bert_tf.cli.expand_globs` never matches them as input.
Local paths use `os` (no TensorFlow import, so data tools start fast); URLs such as gs://... go
through tf.io.gfile.
"""
import contextlib
import os
import re
import shutil
import uuid

from bert_tf.errors import file_error, flag_error

# `.NAME.tmp-PID-XXXXXXXX` (and the visible `NAME.tmp-PID-XXXXXXXX` of earlier versions).
_TEMPORARY_NAME = re.compile(r"^\.?(?P<base>.+)\.tmp-(?P<pid>\d+)-[0-9a-f]{8}$")


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
    """A unique temporary name in the same directory (so the final rename is atomic), hidden
    (a leading dot) so that `ls` and shell globs such as `out/*` do not show it."""
    path = os.fspath(path)
    directory, base = os.path.split(path)
    return os.path.join(directory, f".{base}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")


def is_temporary_name(path):
    """Whether the last component of `path` is one of our temporary names (`temporary_path`)."""
    return _TEMPORARY_NAME.match(os.path.basename(os.fspath(path).rstrip("/"))) is not None


def _process_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: someone else's live process
        return True
    return True


def remove_stale_temporaries(path):
    """Removes the temporary files a killed earlier writer of `path` left beside it (those whose
    process is gone); returns their paths. Local paths only."""
    path = os.fspath(path)
    if is_url(path):
        return []
    directory, base = os.path.split(path.rstrip("/"))
    try:
        names = os.listdir(directory or ".")
    except OSError:
        return []
    removed = []
    for name in names:
        match = _TEMPORARY_NAME.match(name)
        if (match is None or match.group("base") != base or int(match.group("pid")) == os.getpid()
                or _process_alive(int(match.group("pid")))):
            continue
        stale = os.path.join(directory, name)
        try:
            if os.path.isdir(stale) and not os.path.islink(stale):
                shutil.rmtree(stale)
            else:
                os.remove(stale)
            removed.append(stale)
        except OSError:
            pass
    return removed


def check_output_file(path, flag_name="output_file"):
    """An output file must not be an existing directory, nor under a file: checked before any
    work is done."""
    path = os.fspath(path)
    if is_url(path):
        return
    if os.path.isdir(path):
        raise flag_error(flag_name, f"{path}: is a directory, not a file")
    parent = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise flag_error(flag_name, f"{path}: {parent} is a file, not a directory")


def check_input_file(path, flag_name="input_file", allow_empty=False, what="input file"):
    """An input file must exist, be a file (not a directory) and, unless `allow_empty`, hold
    something. Raises an InputError naming the flag and the path."""
    path = os.fspath(path)
    if is_url(path):
        import tensorflow as tf  # only for remote file systems

        exists, isdir = tf.io.gfile.exists, tf.io.gfile.isdir
        size = lambda p: tf.io.gfile.stat(p).length  # noqa: E731
    else:
        exists, isdir, size = os.path.exists, os.path.isdir, os.path.getsize
    if not exists(path):
        raise flag_error(flag_name, f"{path}: {what} not found")
    if isdir(path):
        raise flag_error(flag_name, f"{path}: is a directory, not a file")
    if not allow_empty and size(path) == 0:
        raise flag_error(flag_name, f"{path}: {what} is empty")


def remove_path(path):
    """Removes a file or a directory tree, local or remote (gs://...); a missing one is fine."""
    path = str(path)
    if is_url(path):
        import tensorflow as tf
        if tf.io.gfile.exists(path):
            (tf.io.gfile.rmtree if tf.io.gfile.isdir(path) else tf.io.gfile.remove)(path)
    elif os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.remove(path)


@contextlib.contextmanager
def atomic_output(path):
    """Yields a temporary path to write (a file, or a directory such as a SavedModel); it
    replaces `path` only if the block succeeds, and is removed otherwise."""
    path = str(path).rstrip("/")
    tmp = temporary_path(path)
    if is_url(path):
        import tensorflow as tf
        gfile = tf.io.gfile
        makedirs, exists, isdir = gfile.makedirs, gfile.exists, gfile.isdir
        rename = lambda src, dst: gfile.rename(src, dst, overwrite=True)  # noqa: E731
    else:
        makedirs = lambda d: os.makedirs(d, exist_ok=True)  # noqa: E731
        exists, isdir, rename = os.path.exists, os.path.isdir, os.replace

    parent = os.path.dirname(path)
    if parent:
        makedirs(parent)
    remove_stale_temporaries(path)
    try:
        yield tmp
        if isdir(tmp) and exists(path):  # a directory does not replace another by rename
            remove_path(path)
        rename(tmp, path)
    finally:
        if exists(tmp):
            remove_path(tmp)


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
