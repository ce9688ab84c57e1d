"""The TensorFlow that bert_tf needs, checked when `bert_tf` is imported.

TensorFlow is not a hard requirement of the package: it comes as one of three distributions
(`tensorflow`, `tensorflow[and-cuda]`, `tensorflow-tpu`) that all install the module
`tensorflow`, and a hard `tensorflow` requirement would put a second TensorFlow over a TPU VM's
tensorflow-tpu. The extras `bert_tf[cpu]`, `[gpu]`, `[tpu]` pick one (setup.cfg, with the same
range as here; tests/test_install.py checks that they agree). This check runs without importing
TensorFlow (package metadata only), so it costs `--help` nothing noticeable.
"""
import importlib.metadata
import importlib.util
import os
import re
import sys

# The declared range (setup.cfg's extras): lowest tested in CI, highest exclusive.
TENSORFLOW_MIN = (2, 20)
TENSORFLOW_BELOW = (2, 22)
TENSORFLOW_RANGE = ">=2.20,<2.22"

# Distributions that install the `tensorflow` module, most specific first.
TENSORFLOW_DISTRIBUTIONS = ("tensorflow-tpu", "tensorflow", "tensorflow-cpu", "tensorflow-intel",
                            "tensorflow-macos", "tf-nightly", "tf-nightly-cpu")

# bert_tf is installed from a checkout or a wheel built from one (it is on no package index):
# the extra is asked for where it was installed from, or TensorFlow named directly.
INSTALL_HINT = ("install it with bert_tf's extra from your checkout, pip install '.[cpu]' (CPU), "
                "'.[gpu]' (NVIDIA GPU) or '.[tpu]' (Cloud or Colab TPU VM) (from a wheel: "
                "'bert_tf-<version>-py3-none-any.whl[cpu]'), or pip install "
                f"'tensorflow{TENSORFLOW_RANGE}'")

# Set to 1 to import bert_tf beside a TensorFlow outside the range (untested; at your risk).
SKIP_CHECK_VARIABLE = "BERT_TF_SKIP_TENSORFLOW_CHECK"


def installed_tensorflow():
    """(distribution, version) of the installed TensorFlow, (None, None) when the module
    `tensorflow` cannot be found, or (None, "") when it has no known distribution metadata
    (a build from source)."""
    if importlib.util.find_spec("tensorflow") is None:
        return None, None
    for name in TENSORFLOW_DISTRIBUTIONS:
        try:
            return name, importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None, ""


def _release(version):
    """(major, minor) of a version string such as '2.21.0' or '2.22.0rc1', or None."""
    match = re.match(r"(\d+)\.(\d+)", version)
    return (int(match.group(1)), int(match.group(2))) if match else None


def problem():
    """One line saying what is wrong with the installed TensorFlow, or None when it is fine."""
    distribution, version = installed_tensorflow()
    if version is None:
        return (f"bert_tf needs TensorFlow {TENSORFLOW_RANGE}, which is not installed: "
                f"{INSTALL_HINT}")
    if not version or os.environ.get(SKIP_CHECK_VARIABLE) == "1":
        return None
    release = _release(version)
    if release is None or TENSORFLOW_MIN <= release < TENSORFLOW_BELOW:
        return None
    return (f"bert_tf needs TensorFlow {TENSORFLOW_RANGE}, but {distribution} {version} is "
            f"installed: upgrade that distribution within the range, or {INSTALL_HINT} "
            f"(or set {SKIP_CHECK_VARIABLE}=1 to try it anyway)")


def _run_as_command():
    """True when this process is one of our command lines (python -m run.X / bert_tf.run.X /
    data_tools.X, or a console script), where the message is enough without a traceback."""
    argv = getattr(sys, "orig_argv", sys.argv)  # python -m: bert_tf is imported before __main__
    module = next((argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg == "-m"), "")
    if module.split(".")[0] in ("run", "data_tools") or module.startswith("bert_tf."):
        return True
    script = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return script in {entry.name for entry in importlib.metadata.entry_points(
        group="console_scripts") if entry.value.startswith("bert_tf.")}


def check():
    """Raises ImportError (one line) when TensorFlow is missing or outside the range; in one of
    our command lines, prints that line as `error: ...` and exits 2 instead."""
    message = problem()
    if message is None:
        return
    if _run_as_command():
        print(f"error: {message}", file=sys.stderr)
        sys.exit(2)
    raise ImportError(message)
