"""Tests of the shared plumbing: atomic output, progress lines, CLI error handling."""
import io
import os
import subprocess
import sys

import pytest

from bert_tf import io_utils, progress
from bert_tf.errors import InputError, file_error, flag_error


def test_atomic_output_renames_only_on_success(tmp_path):
    target = tmp_path / "out.txt"
    with io_utils.atomic_open(str(target)) as f:
        f.write("complete")
    assert target.read_text() == "complete"

    with pytest.raises(RuntimeError):
        with io_utils.atomic_open(str(target)) as f:
            f.write("partial")
            raise RuntimeError("killed half-way")
    assert target.read_text() == "complete"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]


def test_progress_reports_rate_eta_and_summary():
    stream = io.StringIO()
    p = progress.Progress("train", total=100, unit="steps", secondary_unit="examples",
                          interval=0, stream=stream)
    p.update(10, secondary=320, loss=1.5)
    p.summary(final_loss=1.25)
    out = stream.getvalue().splitlines()
    assert out[0].startswith("[train] 10/100 steps (10.0%)")
    assert "steps/s" in out[0] and "examples/s" in out[0] and "ETA" in out[0] and "loss=1.5" in out[0]
    assert out[1].startswith("[train] done: 10 steps in") and "final_loss=1.25" in out[1]


def test_format_duration():
    assert progress.format_duration(5) == "5s"
    assert progress.format_duration(125) == "2m05s"
    assert progress.format_duration(3725) == "1h02m05s"


def test_error_messages_name_the_flag_and_file():
    assert str(flag_error("vocab_file", "is empty")) == "--vocab_file: is empty"
    assert str(file_error("a.txt", "bad byte", line_number=3)) == "a.txt:3: bad byte"
    assert isinstance(file_error("a.txt", "x"), InputError)


def test_cli_input_error_exits_2_without_traceback(tmp_path):
    script = tmp_path / "tool.py"
    script.write_text(
        "from bert_tf.cli import run_main\n"
        "from bert_tf.errors import flag_error\n"
        "def main(argv):\n"
        "    raise flag_error('input_file', 'no file matches \\'x*\\'')\n"
        "run_main(main)\n")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env)
    assert result.returncode == 2
    assert "error: --input_file: no file matches 'x*'" in result.stderr
    assert "Traceback" not in result.stderr
