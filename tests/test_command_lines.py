"""The suite's command lines, forked from a process that has imported TensorFlow
(tests/command_lines.py), behave as `python -m` in a fresh process: the same exit status,
output and files (oracle: the fresh process, BERT_TF_FRESH_PROCESSES=1)."""
import json
import re
import subprocess

import pytest

import command_lines
from conftest import PRETRAINING_CONFIG, command_env


def both(module, args, **env):
    """{"forked": (status, stdout, stderr), "fresh": ...} of one command line."""
    return {mode: command_lines.run_module(
                module, args, command_env(BERT_TF_FRESH_PROCESSES=fresh, **env))
            for mode, fresh in (("forked", "0"), ("fresh", "1"))}


def test_a_refusal_and_the_help_are_the_fresh_process_s(tmp_path):
    not_a_model = tmp_path / "not_a_model"
    not_a_model.mkdir()
    runs = both("run.run_pretraining", [f"--init_checkpoint={not_a_model}",
                                        f"--input_file={tmp_path / 'none.tfrecord'}",
                                        f"--output_dir={tmp_path / 'out'}", "--do_train"])
    assert runs["forked"] == runs["fresh"]
    assert runs["forked"][0] == 2 and runs["forked"][2].startswith("error: ")
    runs = both("run.run_classifier", ["--help"])
    assert runs["forked"] == runs["fresh"]
    assert runs["forked"][0] == 0 and "--task_name" in runs["forked"][1]
    assert not (tmp_path / "out").exists()


# A module that shows what a command line's process could notice: names in __main__ it did not
# import, its arguments, an atexit function, an object finalised at exit, sys.exit's message.
PROBE = """
import atexit
import sys


class FinalisedAtExit:
    def __del__(self):
        print("finalised at exit", file=sys.stderr)


kept = FinalisedAtExit()
atexit.register(print, "atexit ran")
print(__name__, sys.argv[0].endswith("probe_module.py"), sys.argv[1:], sys.orig_argv[1:])
print(sorted(name for name in globals() if not name.startswith("__")))
sys.exit("exit message")
"""


def test_the_process_is_a_fresh_one_s_from_its_module_to_its_exit(tmp_path):
    (tmp_path / "probe_module.py").write_text(PROBE)
    runs = {mode: command_lines.run_module("probe_module", ["--a=1", "b"], command_env(
                BERT_TF_FRESH_PROCESSES=fresh), cwd=tmp_path)
            for mode, fresh in (("forked", "0"), ("fresh", "1"))}
    assert runs["forked"] == runs["fresh"]
    status, stdout, stderr = runs["forked"]
    assert status == 1 and "exit message" in stderr and "finalised at exit" in stderr
    assert "['FinalisedAtExit', 'atexit', 'kept', 'sys']" in stdout and "atexit ran" in stdout


def test_a_training_run_writes_the_fresh_process_s_files_and_lines(tmp_path, uncased_vocab,
                                                                  shared_data):
    (tmp_path / "bert_config.json").write_text(json.dumps(PRETRAINING_CONFIG))
    records = tmp_path / "records.tfrecord"
    status, _, stderr = command_lines.run_module("data_tools.create_pretraining_data", [
        f"--input_file={shared_data / 'sample_text.txt'}", f"--output_file={records}",
        f"--vocab_file={uncased_vocab}", "--max_seq_length=32", "--max_predictions_per_seq=5",
        "--dupe_factor=1"], command_env())
    assert status == 0, stderr[-3000:]
    outputs = {}
    for mode, fresh in (("forked", "0"), ("fresh", "1")):
        output_dir = tmp_path / mode
        status, stdout, stderr = command_lines.run_module("run.run_pretraining", [
            f"--bert_config_file={tmp_path / 'bert_config.json'}", f"--input_file={records}",
            f"--output_dir={output_dir}", "--do_train", "--do_eval", "--num_train_steps=3",
            "--num_warmup_steps=0", "--train_batch_size=4", "--max_eval_steps=2", "--seed=1"],
            command_env(BERT_TF_FRESH_PROCESSES=fresh))
        assert status == 0, stderr[-3000:]
        # Times, thread ids and the output folder's name are the only differences a second run
        # may show; TensorFlow's C++ log lines start with a timestamp and a thread id.
        lines = re.sub(r"^([IWEF])\d{4} [\d:.]+ +\d+ ", r"\1 ",
                       (stdout + stderr).replace(str(output_dir), "OUT"), flags=re.M)
        lines = re.sub(r"\d+(\.\d+)? ?(s|steps/s|examples/s|ms)\b", "T", lines)
        outputs[mode] = ((output_dir / "eval_results.txt").read_text(), lines.splitlines())
    assert outputs["forked"][0] == outputs["fresh"][0]
    assert "loss" in outputs["forked"][0]
    assert outputs["forked"][1] == outputs["fresh"][1]


def test_a_command_line_past_its_timeout_is_killed_and_the_next_one_runs(tmp_path):
    line = ["--task_name=mrpc", f"--data_dir={tmp_path}", f"--output_dir={tmp_path / 'out'}",
            "--do_train", f"--vocab_file={tmp_path / 'vocab.txt'}",
            f"--bert_config_file={tmp_path / 'none.json'}"]
    with pytest.raises(subprocess.TimeoutExpired):
        command_lines.run_module("run.run_classifier", line, command_env(), timeout=0.01)
    env = command_lines.command_line_environment(line, command_env())
    assert command_lines.live_server(env) is not None  # it outlived its killed child
    status, _, stderr = command_lines.run_module("run.run_classifier", ["--help"],
                                                 command_env())
    assert status == 0, stderr
