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
    import tensorflow as tf  # imported here: command lines that never glob start without it

    files = []
    for pattern in split_comma_list(patterns) if isinstance(patterns, str) else patterns:
        matched = tf.io.gfile.glob(pattern)
        if not matched:
            raise flag_error(flag_name, f"no file matches {pattern!r}")
        files.extend(matched)
    if not files:
        raise flag_error(flag_name, "no input file given")
    return files
