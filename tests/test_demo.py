"""The README's demo: its generated corpus, and the whole demo run end to end at a tiny size."""
import os
import subprocess
import sys

import pytest

from data_tools import demo_corpus
from conftest import PROJECT_ROOT, command_env


def test_demo_corpus_is_deterministic_and_in_pretraining_format(tmp_path):
    first, second = tmp_path / "a.txt", tmp_path / "b.txt"
    documents, sentences, size = demo_corpus.write_corpus(str(first), num_documents=50, seed=3)
    demo_corpus.write_corpus(str(second), num_documents=50, seed=3)
    text = first.read_text(encoding="utf-8")
    assert text == second.read_text(encoding="utf-8")
    assert size == len(text.encode("utf-8"))
    blocks = text.strip("\n").split("\n\n")
    assert len(blocks) == documents == 50
    assert sum(len(b.split("\n")) for b in blocks) == sentences
    # A blank line ends a document, as the original's input format: none inside one.
    assert all(all(line.strip() for line in b.split("\n")) for b in blocks)
    other = tmp_path / "c.txt"
    demo_corpus.write_corpus(str(other), num_documents=50, seed=4)
    assert other.read_text(encoding="utf-8") != text


@pytest.mark.slow
def test_demo_runs_end_to_end(tmp_path):
    out = tmp_path / "demo"
    result = subprocess.run(
        [sys.executable, "-m", "run.demo", f"--output_dir={out}", "--num_documents=300",
         "--vocab_size=600", "--num_train_steps=300"],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600,
        env=command_env(TF_CPP_MIN_LOG_LEVEL=os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2")))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "=== summary" in result.stdout
    assert "fine-tuning eval (people and cities in new sentences): entity F1=" in result.stdout
    for name in ["corpus.txt", "vocab.txt", os.path.join("records", "pretrain.tfrecord"),
                 os.path.join("records", "pretrain.tfrecord.manifest.json"), "features.jsonl",
                 os.path.join("pretrained", "eval_results.txt"),
                 os.path.join("tagger", "eval_results.txt"),
                 os.path.join("tagger", "test_predictions.txt"),
                 os.path.join("exported_tagger", "saved_model.pb")]:
        assert (out / name).exists(), name
    # The commands are shown as typed (`python -m ...`), and the folder holds only
    # the demo's own files, so that a rerun recognises it as a demo output and reuses it.
    from run import demo
    assert "\n$ python" in result.stdout and "\n$ -m" not in result.stdout
    assert set(os.listdir(out)) <= set(demo.DEMO_ARTIFACTS), os.listdir(out)
