"""A process that has imported TensorFlow and Keras once and runs each command line asked of
it in a child forked from itself (`tests/command_lines.py` starts it and speaks to it).

`python -m run.X` spends 4-9 s of a 2-core machine importing TensorFlow and Keras before the
command line's first line of its own; the suite runs hundreds. A child forked here is a process
of its own, as `python -m` makes it: its own flags, environment, working directory, output
files and exit status, and the command line's module run as `__main__` by the function
`python -m` calls. What it shares with the others is only what the imports above left in
memory, which the command line would have built the same way: the server runs in the
environment its commands run in, and forks before TensorFlow runs an op (no thread, context
or device is made before the fork).

Protocol, one line each way: the client writes a JSON request {module, args, env, cwd,
stdout, stderr}; the server answers `started PID`, then `exited STATUS` (STATUS as
subprocess's returncode: -N for signal N). `ready` is its first line.
"""
import atexit
import io
import json
import os
import runpy
import sys
import threading
import traceback

# The checkout first on the path, as `python -m` from it puts it (not this file's folder).
sys.path[0] = os.getcwd()

import bert_tf  # noqa: E402,F401 (installs the quiet first import of TensorFlow, as in a command line)
import absl.app  # noqa: E402,F401
import absl.logging  # noqa: E402,F401
import keras  # noqa: E402,F401
import numpy  # noqa: E402
import tensorflow  # noqa: E402,F401


def _exit_status(code):
    """The exit status Python gives SystemExit(code)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _run_child(request):
    """In the forked child: becomes the command line's process, runs it, exits. Never returns."""
    status = 1
    try:
        os.chdir(request["cwd"])
        sys.path[0] = os.getcwd()
        os.environ.clear()
        os.environ.update(request["env"])
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
            opened = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(opened, fd)
            os.close(opened)
        # New streams on the new descriptors, buffered as Python's own for files and pipes.
        encoding = sys.stdout.encoding
        sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.FileIO(0, "r", closefd=False),
                                                     encoding=encoding)
        sys.stdout = sys.__stdout__ = io.TextIOWrapper(
            io.BufferedWriter(io.FileIO(1, "w", closefd=False)), encoding=encoding,
            errors="strict")
        sys.stderr = sys.__stderr__ = io.TextIOWrapper(
            io.BufferedWriter(io.FileIO(2, "w", closefd=False)), encoding=encoding,
            errors="backslashreplace", line_buffering=True)
        # A fresh process draws its own seeds (`random` reseeds itself in a forked child).
        numpy.random.seed()
        sys.argv = [request["module"]] + request["args"]
        try:
            # What `python -m` calls: the module runs as __main__, sys.argv[0] its file.
            runpy._run_module_as_main(request["module"], alter_argv=True)
            status = 0
        except SystemExit as e:
            status = _exit_status(e.code)
        except BaseException:  # noqa: BLE001 (as the interpreter: traceback, status 1)
            traceback.print_exc()
            status = 1
        # What the interpreter does at exit: joins the threads, runs the atexit functions.
        threading._shutdown()
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # noqa: BLE001
        try:
            traceback.print_exc()
            sys.stderr.flush()
        except BaseException:  # noqa: BLE001
            pass
    finally:
        os._exit(status)


def serve():
    replies = sys.stdout
    replies.write("ready\n")
    replies.flush()
    for line in iter(sys.stdin.readline, ""):
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _run_child(request)
        replies.write(f"started {pid}\n")
        replies.flush()
        _, wait_status = os.waitpid(pid, 0)
        replies.write(f"exited {os.waitstatus_to_exitcode(wait_status)}\n")
        replies.flush()


if __name__ == "__main__":
    serve()
