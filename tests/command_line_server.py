"""A process that has imported TensorFlow and Keras once and runs each command line asked of
it in a child forked from itself (`tests/command_lines.py` starts it and speaks to it).

`python -m run.X` spends 4-9 s of a 2-core machine importing TensorFlow and Keras before the
command line's first line of its own; the suite runs hundreds. A child forked here is a process
of its own, as `python -m` makes it: its own flags, environment, working directory, output
files and exit status, the command line's module run as a new `__main__` by the function
`python -m` calls, and the interpreter's own exit (threads joined, atexit functions, objects
finalised, C exit handlers). What it shares with the others is what the imports left in memory,
which the command line would have built the same way: the server runs in the environment its
commands run in, and forks before TensorFlow runs an op (no thread, context or device is made
before the fork).

Known differences from a fresh process, none of which the command lines meet: the absl flags
that importing TensorFlow defines (absl's test flags, ...) are known to the parser before the
command line parses its flags; every child has the server's string-hash seed; a GPU would be
initialised before the fork (this suite runs on CPUs).

Protocol, one line each way: the client writes a JSON request {module, args, env, cwd,
stdout, stderr}; the server answers `started PID`, then `exited STATUS` (STATUS as
subprocess's returncode: -N for signal N). `ready` is its first line.
"""
import io
import json
import os
import runpy
import sys
import types

# The checkout first on the path, as `python -m` from it puts it (not this file's folder).
sys.path[0] = os.getcwd()
_ENVIRONMENT_BEFORE_IMPORTS = dict(os.environ)

import bert_tf  # noqa: E402,F401 (installs the quiet first import of TensorFlow, as in a command line)
import absl.app  # noqa: E402,F401
import absl.logging  # noqa: E402,F401
import keras  # noqa: E402,F401
import numpy  # noqa: E402
import tensorflow  # noqa: E402,F401

# Variables the imports set (TF2_BEHAVIOR, KMP_*, ...): a command line's process has them from
# its own import of TensorFlow on, and the processes it starts inherit them.
_SET_BY_IMPORTS = {name: value for name, value in os.environ.items()
                   if _ENVIRONMENT_BEFORE_IMPORTS.get(name) != value}


def _run_child(request):
    """In the forked child: becomes the command line's process and runs it. Leaves the
    interpreter with SystemExit (its exit status), never returning to the server's loop."""
    try:
        os.chdir(request["cwd"])
        sys.path[0] = os.getcwd()
        os.environ.clear()
        os.environ.update(request["env"])
        os.environ.update(_SET_BY_IMPORTS)
        # stdout and stderr stay the same objects (absl's log handler holds stderr), on new
        # descriptors; stdin, whose buffer may hold the server's requests, is /dev/null.
        sys.stdout.flush()
        sys.stderr.flush()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.FileIO(0, "r", closefd=False),
                                                     encoding=sys.stdout.encoding)
        for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
            opened = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(opened, fd)
            os.close(opened)
        # A fresh process draws its own seeds (`random` reseeds itself in a forked child).
        numpy.random.seed()
        sys.orig_argv = [sys.executable, "-m", request["module"]] + request["args"]
        sys.argv = [request["module"]] + request["args"]
        # What `python -m` calls: the module runs as a new __main__, sys.argv[0] its file.
        sys.modules["__main__"] = types.ModuleType("__main__")
        runpy._run_module_as_main(request["module"], alter_argv=True)
    except SystemExit:
        raise
    except BaseException:  # noqa: BLE001 (as the interpreter: the traceback, status 1)
        sys.excepthook(*sys.exc_info())
        raise SystemExit(1)
    raise SystemExit(0)


def serve():
    replies = sys.stdout
    replies.write("ready\n")
    replies.flush()
    for line in iter(sys.stdin.readline, ""):
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            # Raises SystemExit, which leaves the child's interpreter as a fresh one exits.
            _run_child(request)
        replies.write(f"started {pid}\n")
        replies.flush()
        _, wait_status = os.waitpid(pid, 0)
        replies.write(f"exited {os.waitstatus_to_exitcode(wait_status)}\n")
        replies.flush()


if __name__ == "__main__":
    serve()
