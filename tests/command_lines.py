"""Runs `python -m MODULE ARGS` for the suite, in a child forked from a process that has
already imported TensorFlow and Keras (`tests/command_line_server.py`), or in a fresh process.

The fork saves each command line the 4-9 s of those imports. A server is started per
environment, since what the imports read (TensorFlow's variables, glibc's tunables, the
path) must be the command line's own: the server runs in exactly the environment its children
get, including the huge-page tunable a command line would start itself again with
(`bert_tf.huge_pages`). BERT_TF_FRESH_PROCESSES=1 runs every command line in a fresh process;
tests/test_command_lines.py checks that both give the same output, files and exit status.
"""
import atexit
import collections
import json
import os
import pathlib
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

PROJECT_ROOT = pathlib.Path(__file__).resolve().parent.parent
SERVER = pathlib.Path(__file__).resolve().parent / "command_line_server.py"
FRESH_PROCESSES_VARIABLE = "BERT_TF_FRESH_PROCESSES"
# Each server holds TensorFlow's import (about 650 MB); a worker keeps the most recently used.
MAX_SERVERS = 3


class _Server:
    """One server process in `env`; runs one command line at a time."""

    def __init__(self, env):
        self.outputs = tempfile.mkdtemp(prefix="bert_tf_command_lines_")
        import_output = os.path.join(self.outputs, "server_stderr")
        with open(import_output, "wb") as f:
            self.process = subprocess.Popen(
                [sys.executable, str(SERVER)], cwd=PROJECT_ROOT, env=env,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=f, bufsize=0)
        self._buffer = b""
        # A fresh process would print what the imports print: then fresh processes it is.
        self.alive = (self._reply(timeout=300) == "ready"
                      and os.path.getsize(import_output) == 0)

    def _reply(self, timeout):
        """The server's next line; None at its end or after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.process.stdout], [], [], left)[0]:
                return None
            chunk = os.read(self.process.stdout.fileno(), 4096)
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode()

    def run(self, module, args, env, cwd, timeout):
        """(status, stdout, stderr) of the command line; None when the server could not take
        it (it has died: nothing ran)."""
        stdout = os.path.join(self.outputs, "stdout")
        stderr = os.path.join(self.outputs, "stderr")
        request = dict(module=module, args=list(args), env=env, cwd=str(cwd), stdout=stdout,
                       stderr=stderr)
        try:
            self.process.stdin.write((json.dumps(request) + "\n").encode())
        except OSError:
            self.alive = False
            return None
        started = self._reply(timeout=60)
        if started is None or not started.startswith("started "):
            self.alive = False
            return None
        pid = int(started.split()[1])
        exited = self._reply(timeout)
        timed_out = exited is None
        if timed_out:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:  # it ended as the time ran out; its line follows
                pass
            exited = self._reply(timeout=60)
        if exited is None or not exited.startswith("exited "):
            # It ran, perhaps in part: running it again could meet what it left.
            self.alive = False
            raise RuntimeError(f"the command-line server died while running {module}")
        with open(stdout, encoding="utf-8") as f:
            out = f.read()
        with open(stderr, encoding="utf-8") as f:
            err = f.read()
        if timed_out:
            raise subprocess.TimeoutExpired([module] + list(args), timeout, out, err)
        return int(exited.split()[1]), out, err

    def stop(self):
        try:
            self.process.stdin.close()
            self.process.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
        shutil.rmtree(self.outputs, ignore_errors=True)


_servers = collections.OrderedDict()  # environment (a frozenset of its items) -> _Server
_unstartable = set()  # environments whose server could not start (TensorFlow blocked, ...)


@atexit.register
def _stop_servers():
    while _servers:
        _servers.popitem()[1].stop()


def _server(env):
    """The live server of `env`, started if need be; None when it cannot start."""
    key = frozenset(env.items())
    if key in _unstartable:
        return None
    server = _servers.pop(key, None)
    if server is None or not server.alive:
        if server is not None:
            server.stop()
        while len(_servers) >= MAX_SERVERS:
            _servers.popitem(last=False)[1].stop()
        server = _Server(env)
        if not server.alive:
            server.stop()
            _unstartable.add(key)
            return None
    _servers[key] = server  # the most recently used last
    return server


def live_server(env):
    """The running server of `env` (a `command_line_environment`), or None."""
    server = _servers.get(frozenset(env.items()))
    return server if server is not None and server.alive else None


def command_line_environment(args, env):
    """The environment a command line with `args` started in `env` runs in, once it has
    started itself again with huge pages (bert_tf.huge_pages)."""
    from bert_tf.huge_pages import huge_pages_environment
    return huge_pages_environment(list(args), env) or dict(env)


def run_module(module, args, env, cwd=PROJECT_ROOT, timeout=300):
    """(exit status, stdout, stderr) of `python -m module *args` in `env`, run in `cwd`, as
    subprocess.run gives them (subprocess.TimeoutExpired after `timeout` seconds)."""
    env = command_line_environment(args, env)
    if env.get(FRESH_PROCESSES_VARIABLE, os.environ.get(FRESH_PROCESSES_VARIABLE)) != "1":
        server = _server(env)
        result = server and server.run(module, args, env, cwd, timeout)
        if result is not None:
            return result
    process = subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, env=env,
                             capture_output=True, text=True, timeout=timeout)
    return process.returncode, process.stdout, process.stderr


def run_line(line, env, cwd=PROJECT_ROOT, timeout=300):
    """subprocess.run(line, capture_output=True, text=True) for a command line `line`; one of
    `[sys.executable, "-m", module, *args]` runs as `run_module` runs it."""
    line = [str(arg) for arg in line]
    if len(line) >= 3 and line[0] == sys.executable and line[1] == "-m":
        status, stdout, stderr = run_module(line[2], line[3:], env, cwd=cwd, timeout=timeout)
        return subprocess.CompletedProcess(line, status, stdout, stderr)
    return subprocess.run(line, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
