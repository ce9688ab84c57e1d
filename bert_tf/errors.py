"""Errors that mean "the user's input is wrong", as opposed to bugs.

Library code raises `InputError` with a message that names the offending file, line or
argument: `argument_error(name, message)` for an argument of a library function or setting
(`name: message`), `file_error(path, message)` for a file. Messages that mention another
argument write it as `arg(name)`.

A Python caller sees argument names as they are (`bert_config_file: required ...`). The
command lines (`run/`, `data_tools/`) are the only place where library arguments are flags, of
the same names: `bert_tf.cli.run_main` calls `name_arguments_as_flags()`, after which `arg` and
`argument_error` write `--name`, so the `error:` lines name the flag to fix. Command lines raise
`flag_error` for their own flags. `run_main` prints such a message without a traceback and
exits non-zero; anything else is a bug and keeps its traceback.
"""
import contextlib


class InputError(ValueError):
    """Bad user input: a missing or malformed file, an invalid argument or flag value.

    `argument`: the name of the argument (or flag) to fix, when the error names one."""

    argument = None


# How messages write an argument's name: "" for a Python caller, "--" in a command line.
_argument_prefix = ""


def arg(name):
    """How a message names the library argument `name`: `name`, or `--name` in a command line
    (after `name_arguments_as_flags`)."""
    return f"{_argument_prefix}{name}"


def argument_error(name, message):
    """An InputError that names the argument (`arg(name)`) the caller has to fix."""
    error = InputError(f"{arg(name)}: {message}")
    error.argument = name
    return error


@contextlib.contextmanager
def name_arguments_as_flags():
    """Within the block, messages name library arguments as the command line's flags
    (`--name`): for `bert_tf.cli.run_main` only."""
    global _argument_prefix
    saved, _argument_prefix = _argument_prefix, "--"
    try:
        yield
    finally:
        _argument_prefix = saved


def flag_error(flag_name, message):
    """An InputError that names a command line's flag (`--flag_name`) the user has to fix:
    for the command lines (`run/`, `data_tools/`); the library raises `argument_error`."""
    error = InputError(f"--{flag_name}: {message}")
    error.argument = flag_name
    return error


def file_error(path, message, line_number=None):
    """An InputError that names the file (and line, 1-based) the user has to fix."""
    where = f"{path}:{line_number}" if line_number is not None else f"{path}"
    return InputError(f"{where}: {message}")
