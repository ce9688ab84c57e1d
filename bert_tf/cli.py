"""Shared plumbing for the absl command lines in `run/` and `data_tools/`.

The library defines no flags; each command line defines its own and calls `run_main(main)`.
"""
import os
import sys

from bert_tf.errors import InputError, flag_error

# TensorFlow's C++ start-up chatter (oneDNN, CUDA stubs) hides our own progress lines.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


# absl's help flags: it prints the usage (the module docstring, then the flags) and exits 1.
HELP_FLAGS = ("--help", "-help", "-h", "-?", "--helpshort", "-helpshort", "--helpfull",
              "-helpfull", "--helpxml", "-helpxml")


def run_main(main):
    """Runs an absl `main(argv)`; bad input exits with status 2 and a one-line message;
    --help (and --helpfull, ...) exits 0."""
    from absl import app

    help_requested = any(arg.split("=")[0] in HELP_FLAGS for arg in sys.argv[1:])

    def guarded_main(argv):
        try:
            return main(argv)
        except InputError as e:
            print(f"error: {e}", file=sys.stderr)
            sys.exit(2)

    def parse_flags(argv):
        """absl's parsing, but a bad flag (unknown name, invalid value) is one `error:` line
        and exit 2, as other bad input (absl prints its usage text and exits 1)."""
        from absl import flags
        try:
            return flags.FLAGS(argv)
        except flags.Error as e:
            print(f"error: {e}", file=sys.stderr)
            sys.exit(2)

    try:
        app.run(guarded_main, flags_parser=parse_flags)
    except SystemExit as e:
        if help_requested and e.code == 1:  # absl exits 1 after printing the help text
            sys.exit(0)
        raise


def split_comma_list(value):
    """'a, b,,c' -> ['a', 'b', 'c'] (the original's comma-separated flag convention)."""
    return [item.strip() for item in (value or "").split(",") if item.strip()]


def expand_globs(patterns, flag_name):
    """Expands comma-separated globs in the order tf.io.gfile.glob returns them, as the original.

    A glob never matches our temporary files (`bert_tf.io_utils.is_temporary_name`: what a
    killed writer left) nor directories; a name without wildcards that is a directory is an
    error. Raises InputError naming the flag when a pattern matches no file.
    """
    from bert_tf.io_utils import is_temporary_name

    files = []
    for pattern in split_comma_list(patterns) if isinstance(patterns, str) else patterns:
        remote = "://" in pattern
        if remote:
            import tensorflow as tf  # only for remote file systems (gs://, ...)
            matched = tf.io.gfile.glob(pattern)
            is_dir = tf.io.gfile.isdir
        else:
            matched = _local_glob(pattern)
            is_dir = os.path.isdir
        if not any(c in pattern for c in "*?["):
            if matched and is_dir(matched[0]):
                raise flag_error(flag_name, f"{pattern} is a directory, not a file (for the "
                                            f"files in it, pass '{pattern.rstrip('/')}/*')")
        else:
            matched = [path for path in matched  # (no isdir round trips on remote globs)
                       if not is_temporary_name(path) and (remote or not is_dir(path))]
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
