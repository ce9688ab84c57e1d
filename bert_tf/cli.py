"""Shared plumbing for the absl command lines in `run/` and `data_tools/`.

The library defines no flags; each command line defines its own and calls `run_main(main)`.
"""
import os
import sys

from bert_tf.errors import InputError, flag_error

# TensorFlow's C++ start-up chatter (oneDNN, CUDA stubs) hides our own progress lines.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def run_main(main):
    """Runs an absl `main(argv)`; bad input exits with status 2 and a one-line message."""
    from absl import app

    def guarded_main(argv):
        try:
            return main(argv)
        except InputError as e:
            print(f"error: {e}", file=sys.stderr)
            sys.exit(2)

    app.run(guarded_main)


def split_comma_list(value):
    """'a, b,,c' -> ['a', 'b', 'c'] (the original's comma-separated flag convention)."""
    return [item.strip() for item in (value or "").split(",") if item.strip()]


def expand_globs(patterns, flag_name):
    """Expands comma-separated globs in the order tf.io.gfile.glob returns them, as the original.

    Raises InputError naming the flag when a pattern matches nothing.
    """
    files = []
    for pattern in split_comma_list(patterns) if isinstance(patterns, str) else patterns:
        if "://" in pattern:
            import tensorflow as tf  # only for remote file systems (gs://, ...)
            matched = tf.io.gfile.glob(pattern)
        else:
            matched = _local_glob(pattern)
        if not matched:
            raise flag_error(flag_name, f"no file matches {pattern!r}")
        files.extend(matched)
    if not files:
        raise flag_error(flag_name, "no input file given")
    return files


def _local_glob(pattern):
    """tf.io.gfile.glob for local paths without importing TensorFlow (seconds of start-up).

    Same rules as TensorFlow's GetMatchingPaths: a pattern without * ? [ is returned if it
    exists; otherwise the components from the first globbing one on are matched (fnmatch, one
    path component at a time, dot files included) against directory entries in the order the
    directory lists them (TensorFlow does not sort). A glob in the first component of a relative
    path yields "./name", as TensorFlow does.
    """
    import fnmatch

    if not any(c in pattern for c in "*?["):
        return [pattern] if os.path.exists(pattern) else []
    parts = pattern.split("/")
    first = next(i for i, part in enumerate(parts) if any(c in part for c in "*?["))
    base = "/".join(parts[:first]) or ("/" if pattern.startswith("/") else ".")
    paths = [base]
    for level, part in enumerate(parts[first:], start=first):
        last = level == len(parts) - 1
        matched = []
        for parent in paths:
            try:
                children = os.listdir(parent)
            except OSError:
                continue
            for child in children:
                path = os.path.join(parent, child)
                if fnmatch.fnmatchcase(child, part) and (last or os.path.isdir(path)):
                    matched.append(path)
        paths = matched
    return paths
