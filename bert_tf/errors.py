"""Errors that mean "the user's input is wrong", as opposed to bugs.

Library code raises `InputError` with a message that names the offending file, line or flag.
Command lines (see `bert_tf.cli.run_main`) print such a message without a traceback and exit
non-zero; anything else is a bug and keeps its traceback.
"""


class InputError(ValueError):
    """Bad user input: a missing or malformed file, an invalid flag value."""


def flag_error(flag_name, message):
    """An InputError that names the flag (`--flag_name`) the user has to fix."""
    return InputError(f"--{flag_name}: {message}")


def file_error(path, message, line_number=None):
    """An InputError that names the file (and line, 1-based) the user has to fix."""
    where = f"{path}:{line_number}" if line_number is not None else f"{path}"
    return InputError(f"{where}: {message}")
