"""Shared plumbing for the absl command lines in `run/` and `data_tools/`.

The library defines no flags; each command line defines its own and calls `run_main(main)`.

This module is imported by every command line before its flags are parsed: it must not import
TensorFlow (--help and flag errors come without TensorFlow's start-up); `expand_globs` imports
it only for a remote (gs://...) pattern. absl's `app` and `logging` define flags (--verbosity,
--only_check_args, ...) when imported: `run_main` imports them when a command line runs, so
that importing a command line's module (tests, the demo's helpers) defines only its flags.
"""
import errno
import fnmatch
import os
import re
import sys

from absl import flags

from bert_tf.errors import InputError, flag_error, name_arguments_as_flags
from bert_tf.huge_pages import restart_with_huge_pages
from bert_tf.io_utils import is_temporary_name, split_comma_list
from bert_tf.tensorflow_start_up import LOG_PREFIX, StderrFiltered

# TensorFlow's C++ INFO and WARNING lines (CPU feature guard, ...) hide our own progress lines.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# On a CPU without float16 arithmetic (AVX512-FP16: AMD's Zen 4 and Zen 5, most Intel CPUs
# before Sapphire Rapids), oneDNN's graph rewrite logs this ERROR once per process at the first
# float16 op, and TensorFlow runs float16 in its Eigen kernels: the results are right, so it is
# said once as a note (`quiet_float16_fallback_notice`).
_FLOAT16_FALLBACK = re.compile(
    LOG_PREFIX.format(level="E") + r"util\.cc:\d+\] oneDNN supports DT_HALF only on platforms "
    r"with AVX-512")
FLOAT16_FALLBACK_NOTE = (
    "note: --mixed_precision=float16: this CPU has no float16 arithmetic (AVX512-FP16), so "
    "TensorFlow computes float16 in its slower generic kernels; float16 is meant for GPUs "
    "(on a CPU with AVX-512, --mixed_precision=bfloat16)")


# absl's help flags: it prints the usage (the module docstring, then the flags) and exits 1.
HELP_FLAGS = ("--help", "-help", "-h", "-?", "--helpshort", "-helpshort", "--helpfull",
              "-helpfull", "--helpxml", "-helpxml")


def quiet_float16_fallback_notice():
    """For a command line's float16 run: runs one float16 op in a graph now, so that a CPU
    without float16 arithmetic logs oneDNN's ERROR line (`_FLOAT16_FALLBACK`, once per process)
    here, where it is replaced by FLOAT16_FALLBACK_NOTE. Call it once the tf.distribute
    strategy exists (it runs an op)."""
    import tensorflow as tf

    @tf.function
    def product(a, b):
        return tf.matmul(a, b)

    with StderrFiltered(_FLOAT16_FALLBACK) as filtered:
        product(tf.ones([2, 2], tf.float16), tf.ones([2, 2], tf.float16))
    if filtered.dropped:
        print(FLOAT16_FALLBACK_NOTE, file=sys.stderr, flush=True)


def quiet_tensorflow_start_up():
    """TensorFlow's Python INFO lines (SavedModel sharding, signature names, ...) are not
    shown unless --verbosity says so (its start-up banner is already quiet: importing bert_tf
    does it, `bert_tf.tensorflow_start_up`). `run_main` calls it before the command imports
    TensorFlow."""
    from absl import logging

    logging.set_verbosity(logging.WARNING)  # a --verbosity flag, parsed later, overrides it


def run_main(main):
    """Runs an absl `main(argv)`; bad input exits with status 2 and a one-line message;
    --help (and --helpfull, ...) exits 0. TensorFlow's start-up banner and INFO lines are not
    shown (`quiet_tensorflow_start_up`). The library's messages name its arguments as this
    command line's flags (`--name`: `bert_tf.errors.name_arguments_as_flags`). It first starts
    the process again with huge pages for TensorFlow's large buffers, where that helps
    (`bert_tf.huge_pages`)."""
    from absl import app

    restart_with_huge_pages()
    quiet_tensorflow_start_up()
    _help_of_the_command(main)

    help_requested = any(arg.split("=")[0] in HELP_FLAGS for arg in sys.argv[1:])

    def guarded_main(argv):
        try:
            return main(argv)
        except InputError as e:
            print(f"error: {e}", file=sys.stderr)
            sys.exit(2)
        except Exception as e:  # noqa: BLE001 (only permission errors are handled here)
            message = permission_error_message(e)
            if message is None:
                raise
            print(f"error: {message}", file=sys.stderr)
            sys.exit(2)

    def parse_flags(argv):
        """absl's parsing, but a bad flag (unknown name, invalid value, a value outside
        FLAG_RANGES) is one `error:` line and exit 2, as other bad input (absl prints its usage
        text and exits 1)."""
        register_flag_ranges(flags.FLAGS)
        try:
            return flags.FLAGS(argv)
        except flags.Error as e:
            print(f"error: {e}", file=sys.stderr)
            sys.exit(2)

    try:
        with name_arguments_as_flags():
            app.run(guarded_main, flags_parser=parse_flags)
    except SystemExit as e:
        if help_requested and e.code == 1:  # absl exits 1 after printing the help text
            sys.exit(0)
        raise


def _help_of_the_command(main):
    """Makes --help show the command line's docstring and flags when it runs from a console
    script (`run_classifier`, installed by pip): absl's help shows `__main__`'s docstring and
    the flags of the module named `sys.argv[0]`, which are the command's own only under
    `python -m`; a console script's `__main__` is pip's wrapper and its flags live in
    `bert_tf.run.run_classifier`."""
    module_name = main.__module__
    if module_name == "__main__":
        return
    module = sys.modules[module_name]
    sys.modules["__main__"].__doc__ = module.__doc__
    for flag in flags.FLAGS.get_key_flags_for_module(module_name):
        flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)


# The values every command line's numeric flags may take, by flag name: one check for all of
# them, made when the flags are parsed (before any work). A flag of a command line that is in
# no table here takes any value its type allows (tests/test_bad_input.py lists those).
_POSITIVE_INTEGERS = (
    "train_batch_size", "eval_batch_size", "predict_batch_size", "batch_size",
    "save_checkpoints_steps", "iterations_per_loop", "num_tpu_cores", "num_cpu_devices",
    "gradient_accumulation_steps", "keep_checkpoint_max", "log_steps", "max_seq_length",
    "max_predictions_per_seq", "max_eval_steps", "shuffle_buffer_size", "doc_stride",
    "n_best_size", "max_answer_length", "top_k", "vocab_size", "dupe_factor", "num_workers",
    "output_shards", "window_bytes", "num_documents", "min_frequency", "limit_alphabet",
    "num_words", "min_count", "loss_scale_growth_steps", "max_sequences_per_row", "restarts")
_NON_NEGATIVE_NUMBERS = (
    "num_gpus", "num_train_steps", "num_warmup_steps", "num_train_epochs", "finetune_epochs",
    "weight_decay_rate", "max_query_length", "num_unused", "seed", "random_seed",
    "progress_interval", "early_stopping_patience", "early_stopping_threshold",
    "dropout_from_step")
_POSITIVE_NUMBERS = ("learning_rate",)
_AT_LEAST_ONE = ("initial_loss_scale",)
_PROPORTIONS = ("warmup_proportion", "short_seq_prob")
_OPEN_PROPORTIONS = ("masked_lm_prob",)
_DROPOUTS = ("dropout",)
FLAG_RANGES = {
    **{name: (lambda v: v >= 1, "must be a positive integer") for name in _POSITIVE_INTEGERS},
    **{name: (lambda v: v >= 0, "must be >= 0") for name in _NON_NEGATIVE_NUMBERS},
    **{name: (lambda v: v > 0, "must be > 0") for name in _POSITIVE_NUMBERS},
    **{name: (lambda v: v >= 1, "must be >= 1") for name in _AT_LEAST_ONE},
    **{name: (lambda v: 0 <= v <= 1, "must be in [0, 1]") for name in _PROPORTIONS},
    **{name: (lambda v: 0 < v < 1, "must be in the open interval (0, 1)")
       for name in _OPEN_PROPORTIONS},
    **{name: (lambda v: 0 <= v < 1, "must be in [0, 1)") for name in _DROPOUTS},
}


def register_flag_ranges(flag_values):
    """Registers FLAG_RANGES' check for each of them that `flag_values` defines (unset
    optional flags, None, pass)."""
    for name, (in_range, message) in FLAG_RANGES.items():
        if name in flag_values:
            flags.register_validator(name, lambda v, ok=in_range: v is None or ok(v),
                                     message=message, flag_values=flag_values)


def permission_error_message(error):
    """One line for an error that says a path cannot be written or read (permission denied,
    read-only or immutable): Python's PermissionError and TensorFlow's PermissionDeniedError
    (whose message names the path); None for any other error."""
    if isinstance(error, OSError) and error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        where = error.filename or ""
        return f"{where}: {error.strerror.lower()}" if where else str(error)
    tf = sys.modules.get("tensorflow")
    if tf is not None and isinstance(error, tf.errors.PermissionDeniedError):
        return error.message.splitlines()[0]
    return None


def refuse_flags_that_cannot_act(inactive):
    """`inactive`: {flag name: why it cannot act on this run's input or other flags}. The
    first of them given on the command line is an InputError naming it: a flag that would be
    silently ignored is bad input."""
    for name, why in inactive.items():
        if flags.FLAGS[name].present:
            raise flag_error(name, f"cannot act: {why}")


def set_flag_defaults(values, source):
    """Sets each flag of `values` ({flag name: value}) that the command line did not give, and
    says so on one line naming `source` (what the values come from: a recipe, a manifest)."""
    taken = {name: value for name, value in values.items() if not flags.FLAGS[name].present}
    for name, value in taken.items():
        setattr(flags.FLAGS, name, value)
    if taken:
        print(f"*** from {source}: " + " ".join(
            f"--{name}" if value is True else f"--no{name}" if value is False
            else f"--{name}={value}" for name, value in taken.items()),
            file=sys.stderr, flush=True)


def expand_globs(patterns, flag_name):
    """Expands comma-separated globs in the order tf.io.gfile.glob returns them, as the original.

    A glob never matches our temporary files (`bert_tf.io_utils.is_temporary_name`: what a
    killed writer left) nor directories; a name without wildcards that is a directory is an
    error. Raises InputError naming the flag when a pattern matches no file.
    """
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
