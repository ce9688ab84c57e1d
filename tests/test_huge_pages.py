"""bert_tf.huge_pages: a command line's process asks for transparent huge pages for its large
buffers, as the kernel's own accounting (/proc/self/smaps_rollup) shows, in the same process;
the CPU kernels switch turns it off."""
import subprocess
import sys

import pytest

from bert_tf import huge_pages
from tests.conftest import command_env

# A command line whose main fills a 64 MB buffer from glibc's malloc (mapped anew, as
# TensorFlow's large op outputs; not numpy's, which asks for huge pages itself) and prints its
# process id, GLIBC_TUNABLES and the huge pages the kernel gave the process.
TOOL = """
import ctypes
import os
from bert_tf.cli import run_main

def main(argv):
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    buffer = libc.malloc(64 << 20)
    ctypes.memset(buffer, 1, 64 << 20)
    huge = [line.split()[1] for line in open("/proc/self/smaps_rollup")
            if line.startswith("AnonHugePages:")][0]
    print(os.getpid(), os.environ.get("GLIBC_TUNABLES"), huge, ctypes.string_at(buffer + 12345, 1)[0])

run_main(main)
"""


def run_tool(tmp_path, **variables):
    script = tmp_path / "tool.py"
    script.write_text(TOOL)
    process = subprocess.Popen([sys.executable, str(script)], env=command_env(**variables),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err[-3000:]
    pid, tunables, huge_kb, byte = out.split()
    assert byte == "1"
    return process.pid, int(pid), tunables, int(huge_kb)


def test_a_command_line_gets_huge_pages_in_the_same_process(tmp_path):
    expected = huge_pages.huge_pages_environment([], command_env())
    started, pid, tunables, huge_kb = run_tool(tmp_path)
    assert pid == started  # restarted in place: a signal to the process started reaches it
    if expected is None:  # this machine's kernel or glibc: nothing to gain, nothing changed
        assert tunables == "None"
        pytest.skip(f"{huge_pages.THP_MODE_FILE} is not in madvise mode or glibc < 2.35")
    assert tunables == huge_pages.TUNABLE
    assert huge_kb >= 32 << 10, huge_kb
    # The switch off: no restart, 4 KB pages.
    _, _, tunables, huge_kb = run_tool(tmp_path, BERT_TF_CPU_KERNELS="off")
    assert tunables == "None"
    assert huge_kb < 8 << 10, huge_kb


def test_the_tunable_joins_the_users_and_the_flag_wins_over_the_environment(monkeypatch):
    monkeypatch.setattr(huge_pages, "_transparent_huge_pages_mode", lambda: "madvise")
    monkeypatch.setattr(huge_pages, "_glibc_has_the_tunable", lambda: True)
    environment = huge_pages.huge_pages_environment(
        [], {"GLIBC_TUNABLES": "glibc.malloc.tcache_count=0"})
    assert environment["GLIBC_TUNABLES"] == (
        "glibc.malloc.tcache_count=0:glibc.malloc.hugetlb=1")
    assert huge_pages.huge_pages_environment([], {"GLIBC_TUNABLES": environment[
        "GLIBC_TUNABLES"]}) is None
    assert huge_pages.huge_pages_environment(["--cpu_kernels=off"], {}) is None
    assert huge_pages.huge_pages_environment(["--cpu_kernels", "off"], {}) is None
    assert huge_pages.huge_pages_environment(["--cpu_kernels=on"],
                                             {"BERT_TF_CPU_KERNELS": "off"}) is not None
    monkeypatch.setattr(huge_pages, "_transparent_huge_pages_mode", lambda: "always")
    assert huge_pages.huge_pages_environment([], {}) is None
