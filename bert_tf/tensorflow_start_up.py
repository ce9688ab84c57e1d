"""TensorFlow's start-up lines, dropped: what `import tensorflow` prints before it reads its
log level (the oneDNN and CUDA banners, and on a machine without NVIDIA's driver the cuInit
ERROR), which would bury a command line's first lines and a notebook's output.

`quiet_tensorflow_import()` makes this process's first `import tensorflow` drop exactly those
lines and write every other line back to stderr. `import bert_tf` calls it (the API, notebooks,
the command lines); it changes no logging setting of the user's: no log level, no environment
variable.
"""
import importlib.abc
import importlib.util
import os
import re
import sys
import tempfile

# What TensorFlow 2.20-2.21 print when a process first imports it, whatever
# TF_CPP_MIN_LOG_LEVEL says: they are logged by static initializers before TensorFlow reads its
# log level, once by _pywrap_tensorflow_internal.so and again by _pywrap_profiler_plugin.so
# (tf.profiler's extension has its own copy of that code; `import tensorflow` loads both), hence
# the banner twice per process. `_QuietTensorFlowImport` drops them at that import.
# A log line's prefix: absl's (2.21: "I0000 00:00:1795577489.206691   26926 ") or TensorFlow's
# own (2.20: "2026-11-25 04:48:22.640903: I external/local_xla/xla/tsl/cuda/").
LOG_PREFIX = r"(?:{level}\d{{4}} [\d:. ]+\d+ |\d{{4}}-\d\d-\d\d [\d:.]+: {level} \S*?)"
START_UP_NOISE = re.compile(
    r"WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR$"
    + r"|" + LOG_PREFIX.format(level="[IW]") + r"(port\.cc:\d+\] oneDNN custom operations are on"
    r"|cudart_stub\.cc:\d+\] Could not find cuda drivers on your machine)")
# On a machine without NVIDIA's driver, the CUDA build of TensorFlow (the `tensorflow` wheel)
# logs this ERROR when it first lists devices: no GPU could be there, so it is noise.
NO_DRIVER_NOISE = re.compile(
    LOG_PREFIX.format(level="E") + r"cuda_platform\.cc:\d+\] failed call to cuInit")


class _QuietTensorFlowImport(importlib.abc.MetaPathFinder):
    """Imports TensorFlow, wherever the process first does, with file descriptor 2 sent to a
    temporary file; then lists the physical devices (what every command does first; it creates
    no context, so device configuration stays possible) and writes back to stderr every line
    but TensorFlow's start-up banner (`START_UP_NOISE`, `NO_DRIVER_NOISE`). Everything is
    written back if the import fails."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "tensorflow":
            return None
        sys.meta_path.remove(self)  # one import only; the real finder finds it below
        spec = importlib.util.find_spec(fullname)
        if spec is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module = spec.loader.exec_module

        def quiet_exec_module(module):
            with StderrFiltered():
                exec_module(module)
                module.config.list_physical_devices()

        spec.loader = _Loader(spec.loader, quiet_exec_module)
        return spec


class _Loader(importlib.abc.Loader):
    """`loader` with its exec_module replaced."""

    def __init__(self, loader, exec_module):
        self._loader, self.exec_module = loader, exec_module

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def __getattr__(self, name):
        return getattr(self._loader, name)


class StderrFiltered:
    """Sends file descriptor 2 to a temporary file; on exit, writes its lines back to stderr,
    without the lines `noise` matches (default: the start-up noise) unless an exception is
    leaving. `dropped`: the lines left out."""

    def __init__(self, noise=None):
        self._noise = noise
        self.dropped = []

    def __enter__(self):
        sys.stderr.flush()
        self._file = tempfile.TemporaryFile()
        self._saved = os.dup(2)
        os.dup2(self._file.fileno(), 2)
        return self

    def __exit__(self, kind, value, traceback):
        sys.stderr.flush()
        os.dup2(self._saved, 2)
        os.close(self._saved)
        self._file.seek(0)
        text = self._file.read().decode("utf-8", "replace")
        self._file.close()
        kept = []
        for line in text.splitlines(keepends=True):
            (kept if kind is not None or not self._is_noise(line) else self.dropped).append(line)
        if kept:
            sys.stderr.write("".join(kept))
            sys.stderr.flush()
        return False

    def _is_noise(self, line):
        if self._noise is not None:
            return bool(self._noise.match(line))
        no_driver = not (os.path.exists("/proc/driver/nvidia") or os.path.exists("/dev/nvidiactl"))
        return bool(START_UP_NOISE.match(line) or (no_driver and NO_DRIVER_NOISE.match(line)))


def quiet_tensorflow_import():
    """From now on, this process's first `import tensorflow` prints no start-up banner (a
    process that imported it already is left as it is)."""
    if "tensorflow" not in sys.modules and not any(
            isinstance(finder, _QuietTensorFlowImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _QuietTensorFlowImport())
