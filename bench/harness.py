"""The frame every bench runs in, so that a bench keeps only what it measures: its --rounds and
--peers flags, the peers' venvs, the child processes that run one peer (in its venv where it
needs one), the rounds that interleave the peers, and the medians and ratios its table prints.

Only the standard library is imported: the peers' venvs import this module too (their children
run as `python -m bench.<group>.<name> --child ...` from the project root).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from bench.common import PROJECT_ROOT, load_average


# ---- The peers' venvs, outside the repository (made by the scripts in bench/envs).

class Venv:
    """A peer's venv: $`variable`, or ~/.cache/bert_tf/`name`; `script` in bench/envs makes it."""

    def __init__(self, variable, name, script):
        self.path = os.environ.get(variable, os.path.expanduser(f"~/.cache/bert_tf/{name}"))
        self.python = os.path.join(self.path, "bin", "python")
        self.script = script

    def exists(self):
        return os.path.exists(self.python)

    def missing(self):
        """What to say when the venv is not there."""
        return f"no venv at {self.path}; create it with `bash bench/envs/{self.script}`"

    def require(self):
        """Exits with `missing()` when the venv is not there."""
        if not self.exists():
            sys.exit(self.missing())


HF = Venv("BERT_TF_HF_VENV", "hf-venv", "hf_env.sh")
SERVING = Venv("BERT_TF_SERVING_VENV", "serving-venv", "serving_env.sh")
MODEL_GARDEN = Venv("BERT_TF_MODEL_GARDEN_VENV", "model-garden-venv", "model_garden_env.sh")


# ---- Flags.

def add_rounds(parser, default, help="interleaved rounds (the table gives medians over them)"):
    parser.add_argument("--rounds", type=int, default=default, help=help)


def add_peers(parser, known, default=None, flag="--peers", help=None):
    """A comma-separated list of peers (`known`, or those of `default`); read it with `peers`."""
    parser.add_argument(flag, default=",".join(default or known),
                        help=help or f"comma-separated, of {', '.join(known)}")


def peers(parser, value, known=None, venvs=None, what="peers"):
    """The names of a comma-separated flag, in its order: a name outside `known` is a usage
    error; a peer whose venv ({peer: Venv}) is missing is left out, with a message."""
    names = [name for name in value.split(",") if name]
    unknown = set(names) - set(known or names)
    if unknown:
        parser.error(f"unknown {what} {sorted(unknown)}; choose from {', '.join(known)}")
    for peer, venv in (venvs or {}).items():
        if peer in names and not venv.exists():
            print(f"{peer} skipped: {venv.missing()}", flush=True)
            names.remove(peer)
    return names


def add_work_dir(parser, help="outputs here (default: a temporary directory)"):
    parser.add_argument("--work_dir", help=help)


def work_dir(args, prefix):
    """--work_dir (made if it is not there), or a new temporary directory."""
    if not args.work_dir:
        return tempfile.mkdtemp(prefix=prefix)
    os.makedirs(args.work_dir, exist_ok=True)
    return args.work_dir


def add_child(parser):
    """The hidden flag with which a bench runs itself as one peer's child: a JSON spec."""
    parser.add_argument("--child", help=argparse.SUPPRESS)


# ---- Child processes, run from the project root.

def python_of(venv):
    return venv.python if venv else sys.executable


def module_command(module, *args, venv=None):
    """`python -m module args`, with the python of `venv` (None: this one)."""
    return [python_of(venv), "-m", module, *map(str, args)]


def child_command(module, spec, *args, venv=None):
    """`python -m module --child <spec as JSON> args`: a bench run as one peer's child."""
    return module_command(module, "--child", json.dumps(spec), *args, venv=venv)


def script_command(script, *args, venv=None):
    """`python -c script args`."""
    return [python_of(venv), "-c", script, *map(str, args)]


def answer(out):
    """What a child prints last: its result, one JSON line (run_child reads it)."""
    print(json.dumps(out), flush=True)


def run_child(command, label, env=None, log=None, on_line=None, check=False):
    """Runs `command`: the JSON object its stdout ends with, plus "wall_s" (the process's wall
    seconds). Its stderr goes to the file `log` when given, and each of its lines to `on_line`.
    When it fails: with `check`, exits naming `label`; otherwise None, its stderr's end printed
    (unless it is in `log`)."""
    start = time.perf_counter()
    tail = []
    # stdout to a file, not a pipe: a result may be large.
    with tempfile.TemporaryFile("w+") as out, open(log or os.devnull, "w") as log_file:
        process = subprocess.Popen(command, cwd=PROJECT_ROOT, env=env, stdout=out,
                                   stderr=subprocess.PIPE, text=True)
        for line in process.stderr:
            tail = (tail + [line])[-60:]
            log_file.write(line)
            if on_line:
                on_line(line)
        code = process.wait()
        out.seek(0)
        stdout = out.read()
    wall = time.perf_counter() - start
    if code != 0:
        message = f"{label}: failed (exit {code})\n{''.join(tail)[-3000:]}"
        if check:
            sys.exit(message)
        if not log:
            print(f"  {message}", file=sys.stderr, flush=True)
        return None
    result = json.loads(stdout.strip().splitlines()[-1])
    result["wall_s"] = wall
    return result


def run_command(command, label, env=None, on_line=None):
    """Runs `command` (not a JSON child), its output captured, each line of its stderr also to
    `on_line` as it comes when given; exits naming `label` and showing its stderr's end when it
    fails. The CompletedProcess, with `seconds` (its wall time)."""
    start = time.perf_counter()
    if on_line is None:
        result = subprocess.run(command, cwd=PROJECT_ROOT, env=env, capture_output=True,
                                text=True)
    else:
        # stdout to a file, not a pipe, while stderr is read line by line.
        with tempfile.TemporaryFile("w+") as out:
            process = subprocess.Popen(command, cwd=PROJECT_ROOT, env=env, stdout=out,
                                       stderr=subprocess.PIPE, text=True)
            lines = []
            for line in process.stderr:
                lines.append(line)
                on_line(line)
            process.wait()
            out.seek(0)
            result = subprocess.CompletedProcess(command, process.returncode, out.read(),
                                                 "".join(lines))
    result.seconds = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"{label} failed ({' '.join(map(str, command))}):\n{result.stderr[-3000:]}")
    return result


# ---- Rounds.

def interleave(rounds, keys, measure, alternate=False):
    """{key: [measure(key, round_index) of each round]}: every key once per round, in the order
    of `keys` (with `alternate`, reversed in every other round), so that the load of a shared
    machine falls on all alike. A None result (a failed run) is left out, and so is a key with
    none."""
    results = {key: [] for key in keys}
    for round_index in range(rounds):
        order = list(keys)
        if alternate and round_index % 2:
            order.reverse()
        for key in order:
            out = measure(key, round_index)
            if out is not None:
                results[key].append(out)
    return {key: runs for key, runs in results.items() if runs}


def stamp():
    """The date, the cores and the load: the first line of a bench's log."""
    return (f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}, {os.cpu_count()} cores, load average "
            f"{load_average():.2f}")


# ---- The table.

def value(run, key=None):
    """`run` itself, run[key], or key(run) when `key` is a function."""
    if key is None:
        return run
    return key(run) if callable(key) else run[key]


def median(runs, key=None, statistic=statistics.median):
    """The median over rounds (or another `statistic`) of value(run, key)."""
    return statistic([value(run, key) for run in runs])


def medians(results, key=None, statistic=statistics.median):
    """{peer: median(its runs, key)} of interleave's results."""
    return {peer: median(runs, key, statistic) for peer, runs in results.items()}


def ratio(numerator, denominator, digits=2, missing="-"):
    """numerator / denominator as "1.23x"; `missing` when either is None."""
    if numerator is None or denominator is None:
        return missing
    return f"{numerator / denominator:.{digits}f}x"


def markdown(header, rows, align=None):
    """The lines of a markdown table; `align`: one of "l"/"r" per column (default: none)."""
    rule = "".join("|---:" if a == "r" else "|---" for a in (align or ["l"] * len(header)))
    return (["| " + " | ".join(header) + " |", rule + "|"]
            + ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows])
