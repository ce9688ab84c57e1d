"""Atomic output: write under a temporary name, rename when complete.

A job killed half-way leaves no truncated file under the final name (at most a hidden
`.NAME.tmp-PID-XXXXXXXX` file beside it), so a rerun or a downstream reader never mistakes a
partial file for a finished one. Such leftovers are removed by the next write of the same output
(once their process is gone), and `bert_tf.cli.expand_globs` never matches them as input.
Local paths use `os` (no TensorFlow import, so data tools start fast); URLs such as gs://... go
through tf.io.gfile, imported by the function that meets one (every command line imports this
module before parsing its flags).
"""
import contextlib
import os
import re
import shutil
import uuid

from bert_tf.errors import arg, argument_error, file_error

# `.NAME.tmp-PID-XXXXXXXX`, and the visible `NAME.tmp-PID-XXXXXXXX` that an output folder
# written by an older bert_tf may hold.
_TEMPORARY_NAME = re.compile(r"^\.?(?P<base>.+)\.tmp-(?P<pid>\d+)-[0-9a-f]{8}$")


def split_comma_list(value):
    """'a, b,,c' -> ['a', 'b', 'c'] (the original's comma-separated list convention, as in its
    --input_file and --label_list)."""
    return [item.strip() for item in (value or "").split(",") if item.strip()]


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


def check_output_file(path, argument="output_file", inputs=None):
    """An output file (the value of `argument`) must not be an existing directory, nor under a
    file, nor one of the command's `inputs` ({argument name: [paths]}), which writing it would
    replace: checked before any work is done."""
    path = os.fspath(path)
    if is_url(path):
        return
    if os.path.isdir(path):
        raise argument_error(argument, f"{path}: is a directory, not a file")
    for input_argument, input_paths in (inputs or {}).items():
        for input_path in [input_paths] if isinstance(input_paths, str) else input_paths or ():
            if (input_path and not is_url(input_path) and os.path.exists(path)
                    and os.path.samefile(path, input_path)):
                raise argument_error(argument, f"{path} is also {arg(input_argument)}: writing "
                                               f"it would replace that input; nothing was "
                                               f"written")
    parent = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise argument_error(argument, f"{path}: {parent} is a file, not a directory")


def decode_utf8(data, path, first_line_number=1):
    """`data` (bytes of file `path`, its first line `first_line_number`; None: unknown)
    decoded as UTF-8; a byte that is not UTF-8 is an InputError naming the file, line and
    byte: every reader of text files says the same."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = (None if first_line_number is None
                else first_line_number + data.count(b"\n", 0, e.start))
        column = e.start - data.rfind(b"\n", 0, e.start)
        raise file_error(path, f"not valid UTF-8 ({e.reason}: byte 0x{data[e.start]:02x} at "
                               f"byte {column} of the line)", line) from None


def read_text(path, what="input file"):
    """The text of file `path` (`what` it is, for a missing one): `open_input`, then
    `decode_utf8`."""
    with open_input(path, what) as f:
        return decode_utf8(f.read(), path)


def check_input_file(path, argument="input_file", allow_empty=False, what="input file"):
    """An input file must exist, be a file (not a directory) and, unless `allow_empty`, hold
    something. Raises an InputError naming the argument and the path."""
    path = os.fspath(path)
    if is_url(path):
        import tensorflow as tf  # only for remote file systems

        exists, isdir = tf.io.gfile.exists, tf.io.gfile.isdir
        size = lambda p: tf.io.gfile.stat(p).length  # noqa: E731
    else:
        exists, isdir, size = os.path.exists, os.path.isdir, os.path.getsize
    if not exists(path):
        raise argument_error(argument, f"{path}: {what} not found")
    if isdir(path):
        raise argument_error(argument, f"{path}: is a directory, not a file")
    if not allow_empty and size(path) == 0:
        raise argument_error(argument, f"{path}: {what} is empty")


def check_writable_dir(path, argument="output_dir"):
    """A directory the command will create or write into: it must be a directory (or not exist
    yet) and writable, or be creatable under its nearest existing parent. Checked before any
    work; creates nothing. Remote paths (gs://...) are left to the file system."""
    path = os.fspath(path)
    if is_url(path):
        return
    if os.path.exists(path) and not os.path.isdir(path):
        raise argument_error(argument, f"{path} is a file, not a directory")
    existing = os.path.abspath(path)
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise argument_error(argument, f"{path}: {existing} is a file, not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        what = "is not writable" if existing == os.path.abspath(path) else (
            f"cannot be created: {existing} is not writable")
        raise argument_error(argument, f"{path} {what} (permission denied, a read-only or an "
                                       f"immutable folder)")


def same_or_inside(path, folder):
    """Whether local `path` is `folder` or lies inside it (symbolic links resolved)."""
    path, folder = os.path.realpath(path), os.path.realpath(folder)
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def check_replaceable_dir(path, argument, unexpected_entries, what, keep=None):
    """A directory that a command replaces as a whole (an export): it must not exist, be
    empty, or be one that this kind of command wrote and that holds nothing else at any depth:
    `unexpected_entries(path)` lists what it holds beyond what was written ([]: replaceable),
    or is None for a folder that is not `what`. Anything else of the user's is refused before
    any work, naming the first unexpected file, and so is a path that is, or holds, one of the
    `keep` folders ({argument name: path}: the run's output and checkpoint folders), which
    replacing it would delete. Local paths only."""
    path = os.fspath(path)
    if is_url(path):
        return
    for other_argument, other in (keep or {}).items():
        if other and not is_url(other) and same_or_inside(other, path):
            raise argument_error(argument, f"{path} would replace {arg(other_argument)}'s "
                                           f"{other}; nothing was deleted: export to another "
                                           f"folder")
    if not os.path.lexists(path):
        return
    if not os.path.isdir(path) or os.path.islink(path):
        raise argument_error(argument, f"{path} is a file, not a directory")
    names = sorted(os.listdir(path))
    if not names:
        return
    unexpected = unexpected_entries(path)
    if unexpected is None:
        more = f" and {len(names) - 1} more" if len(names) > 1 else ""
        raise argument_error(argument, f"{path} is not empty and not {what} (it holds "
                                       f"{names[0]!r}{more}); nothing was deleted: pass a new "
                                       f"or empty folder, or remove it yourself")
    if unexpected:
        more = f" and {len(unexpected) - 1} more" if len(unexpected) > 1 else ""
        raise argument_error(argument, f"{path} is {what} but also holds "
                                       f"{unexpected[0]!r}{more}, which the export did not "
                                       f"write; nothing was deleted: move it out, pass a new "
                                       f"or empty folder, or remove the folder yourself")


@contextlib.contextmanager
def removed_on_failure(directory):
    """What the block creates in local `directory` is removed if the block raises (and the
    directory too if the block created it): a command that fails while preparing its inputs
    leaves no partial outputs. What was there before is never touched."""
    directory = os.fspath(directory)
    if is_url(directory):
        yield
        return
    existed = os.path.isdir(directory)
    before = set(os.listdir(directory)) if existed else set()
    try:
        yield
    except BaseException:
        if os.path.isdir(directory):
            for name in set(os.listdir(directory)) - before:
                remove_path(os.path.join(directory, name))
            if not existed and not os.listdir(directory):
                os.rmdir(directory)
        raise


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


def checkpoint_folder(path):
    """The folder that holds checkpoint `path` (a directory, or a checkpoint prefix's)."""
    path = os.fspath(path)
    return path if os.path.isdir(path) else (os.path.dirname(path) or ".")
