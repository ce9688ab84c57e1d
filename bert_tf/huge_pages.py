"""Transparent huge pages for TensorFlow's large host buffers, in a command line's process.

TensorFlow allocates each op's output anew. glibc serves a buffer above 32 MB (the masked-LM
logits of a small model: [predictions, vocabulary] float32, 78 MB at batch 32) with a fresh
mmap, and on a kernel whose transparent huge pages are in "madvise" mode every use of it takes
a page fault per 4 KB: 19,800 for those logits (figures: docs/scaling.md). glibc's tunable
`glibc.malloc.hugetlb=1` (glibc 2.35 and newer) asks for huge pages on such mappings: 1,600
faults. glibc reads tunables only when a process starts, so `run_main` starts the command line
again with it set (`huge_pages_environment`; os.execve: the same process id, arguments and
streams) before it does anything else. The numbers are the same: only how memory is mapped
changes. It is one of the CPU speed-ups, off with the CPU kernels switch (`--cpu_kernels=off`,
BERT_TF_CPU_KERNELS=off).
"""
import os
import re
import sys

from bert_tf.cpu_switch import cpu_switch_from_environment

TUNABLE = "glibc.malloc.hugetlb=1"
THP_MODE_FILE = "/sys/kernel/mm/transparent_hugepage/enabled"


def _transparent_huge_pages_mode():
    try:
        with open(THP_MODE_FILE) as f:
            found = re.search(r"\[(\w+)\]", f.read())
    except OSError:
        return None
    return found and found.group(1)


def _glibc_has_the_tunable():
    try:
        version = os.confstr("CS_GNU_LIBC_VERSION")  # "glibc 2.36"
    except (AttributeError, ValueError, OSError):
        return False
    found = version and re.fullmatch(r"glibc (\d+)\.(\d+).*", version)
    return bool(found) and (int(found.group(1)), int(found.group(2))) >= (2, 35)


def _switched_off(argv, environ):
    """The CPU kernels switch is "off" in the arguments (the last --cpu_kernels wins, as in
    absl) or, without the flag, in the environment."""
    value = cpu_switch_from_environment(environ)
    for i, arg in enumerate(argv):
        if arg.startswith("--cpu_kernels="):
            value = arg.split("=", 1)[1]
        elif arg == "--cpu_kernels" and i + 1 < len(argv):
            value = argv[i + 1]
    return value == "off"


def huge_pages_environment(argv, environ):
    """The environment to start this command line again in, with glibc's huge-page tunable
    added to GLIBC_TUNABLES; None when that would change nothing (not Linux, huge pages not in
    "madvise" mode, a glibc without the tunable, the tunable already set, the switch off)."""
    if (not sys.platform.startswith("linux") or _switched_off(argv, environ)
            or "glibc.malloc.hugetlb" in environ.get("GLIBC_TUNABLES", "")
            or _transparent_huge_pages_mode() != "madvise" or not _glibc_has_the_tunable()):
        return None
    tunables = environ.get("GLIBC_TUNABLES")
    return dict(environ, GLIBC_TUNABLES=f"{tunables}:{TUNABLE}" if tunables else TUNABLE)


def restart_with_huge_pages():
    """Starts this process's command line again with `huge_pages_environment`, if it changes
    anything. Call it first thing in a command line's process (it replaces the process)."""
    environ = huge_pages_environment(sys.argv[1:], os.environ)
    if environ is None:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable] + sys.orig_argv[1:], environ)
