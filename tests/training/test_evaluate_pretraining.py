"""run.evaluate_pretraining: its table against separate runs of the task command lines with the
same settings (run_classifier on MRPC, from the checkpoint and, for the random baseline, from no
checkpoint: a fresh initialisation of the same config; run_ner, and run_ner --feature_layers for
the feature-based variant); an evaluation killed while preparing, then after a run, resumes and
redoes no finished run; a restart with other settings refused, the summary's means and spreads
against numpy, and bad input refused before anything is written."""
import json
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from tests.conftest import (PROJECT_ROOT, assert_refused, command_env, run_command_line)

MODULE = "run.evaluate_pretraining"
PROTOCOL = dict(learning_rate=1e-4, num_train_epochs=1, train_batch_size=16)
TASKS = ("MRPC", "CoNLL-2003", "CoNLL-2003/sum_last_four")


@pytest.fixture(scope="module")
def small_data(tmp_path_factory, shared_data):
    """MRPC (its first 48 training rows, its first 64 dev rows) and CoNLL-2003 (its first 40
    training sentences, the first 60 of valid.txt): each run a few seconds."""
    root = tmp_path_factory.mktemp("suite-data")
    mrpc = root / "glue" / "MRPC"
    mrpc.mkdir(parents=True)
    for name, rows in (("train.tsv", 48), ("dev.tsv", 64)):
        lines = (shared_data / "glue_data" / "MRPC" / name).read_text(encoding="utf-8")
        (mrpc / name).write_text("".join(lines.splitlines(True)[:rows + 1]), encoding="utf-8")
    conll = root / "conll"
    conll.mkdir()
    for name, sentences in (("train.txt", 40), ("valid.txt", 60)):
        text = (shared_data / "conll2003" / name).read_text(encoding="utf-8")
        blocks = [b for b in text.split("\n\n") if b.strip() and "-DOCSTART-" not in b]
        (conll / name).write_text("\n\n".join(blocks[:sentences]) + "\n", encoding="utf-8")
    return {"data_dir": root / "glue", "conll_dir": conll}


def evaluation_flags(model, small_data, output_dir, **more):
    return dict(dict(models=model, tasks=",".join(TASKS), output_dir=output_dir,
                     data_dir=small_data["data_dir"], conll_dir=small_data["conll_dir"],
                     train_slices="MRPC=48,CoNLL-2003=40", **PROTOCOL), **more)


def table(path):
    lines = path.read_text().splitlines()
    header = lines[0].split("\t")
    return [dict(zip(header, line.split("\t"))) for line in lines[1:]]


def eval_results(folder):
    results = {}
    for line in (folder / "eval_results.txt").read_text().splitlines():
        key, _, value = line.partition(" = ")
        results[key] = float(value)
    return results


def test_table_equals_the_task_command_lines_and_a_killed_evaluation_redoes_no_run(
        pretraining_folders, small_data, uncased_vocab, tmp_path):
    model = pretraining_folders["mlm"]
    out = tmp_path / "evaluation"
    flags = evaluation_flags(model, small_data, out)
    line = [sys.executable, "-m", MODULE] + [f"--{k}={v}" for k, v in flags.items()]

    def killed_once_written(path, poll):
        process = subprocess.Popen(line, cwd=PROJECT_ROOT, env=command_env(),
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 240
        while not path.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(poll)
        assert path.exists(), process.communicate()[0][-3000:]
        process.send_signal(signal.SIGKILL)
        process.wait()

    # Killed while it writes the tasks' data and records (before any run): its own folder.
    killed_once_written(out / "data", poll=0.01)
    assert not (out / "results.tsv").exists()
    first = out / "runs" / "mlm" / "step-2" / "MRPC" / "seed-0" / "result.json"
    killed_once_written(first, poll=0.2)
    written = first.stat().st_mtime_ns
    status, log = run_command_line(MODULE, flags)
    assert status == 0, log[-3000:]
    assert first.stat().st_mtime_ns == written
    assert "mlm step 2 MRPC seed 0: run 1/6 finished earlier" in log
    rows = {(r["model"], int(r["step"]), r["task"], int(r["seed"])): float(r["score"])
            for r in table(out / "results.tsv")}
    assert set(rows) == {("mlm", step, task, 0) for step in (2, -1) for task in TASKS}

    # The same settings through the task command lines: the same scores.
    common = dict(do_train=True, do_eval=True, seed=0, max_seq_length=128, **PROTOCOL)
    checkpoint = model / "model.ckpt-2"
    status, log = run_command_line("run.run_classifier", dict(
        task_name="MRPC", data_dir=out / "data" / "MRPC", init_checkpoint=checkpoint,
        output_dir=tmp_path / "mrpc", **common))
    assert status == 0, log[-3000:]
    assert eval_results(tmp_path / "mrpc")["eval_f1"] * 100 == pytest.approx(
        rows[("mlm", 2, "MRPC", 0)], abs=1e-4)
    status, log = run_command_line("run.run_classifier", dict(
        task_name="MRPC", data_dir=out / "data" / "MRPC", output_dir=tmp_path / "random",
        bert_config_file=model / "bert_config.json", vocab_file=uncased_vocab,
        do_lower_case=True, **common))
    assert status == 0, log[-3000:]
    assert eval_results(tmp_path / "random")["eval_f1"] * 100 == pytest.approx(
        rows[("mlm", -1, "MRPC", 0)], abs=1e-4)
    status, log = run_command_line("run.run_ner", dict(
        data_dir=out / "data" / "CoNLL-2003", train_file="train.txt", dev_file="valid.txt",
        init_checkpoint=checkpoint, output_dir=tmp_path / "ner", **common))
    assert status == 0, log[-3000:]
    assert eval_results(tmp_path / "ner")["eval_f1"] * 100 == pytest.approx(
        rows[("mlm", 2, "CoNLL-2003", 0)], abs=1e-4)
    status, log = run_command_line("run.run_ner", dict(
        data_dir=out / "data" / "CoNLL-2003", train_file="train.txt", dev_file="valid.txt",
        init_checkpoint=checkpoint, output_dir=tmp_path / "features",
        feature_layers="sum_last_four", **common))
    assert status == 0, log[-3000:]
    assert eval_results(tmp_path / "features")["eval_f1"] * 100 == pytest.approx(
        rows[("mlm", 2, "CoNLL-2003/sum_last_four", 0)], abs=1e-4)
    # The runs keep their results, not their checkpoints.
    assert not list((out / "runs").rglob("model.ckpt-*"))
    assert "| mlm | 2 |" in (out / "results.md").read_text()
    # Started again with another protocol: refused, the evaluation untouched.
    assert_refused(MODULE, dict(flags, learning_rate=3e-4), "holds an evaluation with other",
                   out)


def test_a_hugging_face_directory_is_scored_as_run_classifier_scores_it(small_data, tmp_path):
    """Any model directory, not only a pretraining run's folder: the real all-MiniLM-L6-v2
    Hugging Face directory is one row of step 0, whose score is run_classifier's from that
    directory with the same settings."""
    from tests.conftest import minilm_directory
    model = minilm_directory()
    out = tmp_path / "evaluation"
    status, log = run_command_line(MODULE, evaluation_flags(
        model, small_data, out, tasks="MRPC", train_slices="MRPC=48", no_baseline=True))
    assert status == 0, log[-3000:]
    rows = table(out / "results.tsv")
    assert [(r["model"], r["step"], r["task"], r["seed"]) for r in rows] == [
        (model.name, "0", "MRPC", "0")]
    status, log = run_command_line("run.run_classifier", dict(
        task_name="MRPC", data_dir=out / "data" / "MRPC", init_checkpoint=model,
        output_dir=tmp_path / "mrpc", do_train=True, do_eval=True, seed=0, max_seq_length=128,
        **PROTOCOL))
    assert status == 0, log[-3000:]
    assert eval_results(tmp_path / "mrpc")["eval_f1"] * 100 == pytest.approx(
        float(rows[0]["score"]), abs=1e-4)


def test_protocol_task_names_and_remote_models_are_checked():
    from bert_tf.errors import InputError
    from bert_tf.training.pretraining_evaluation import driver, suite
    with pytest.raises(InputError, match="unknown task 'CoNLL-2003/middle_two'"):
        suite.suite_tasks(["CoNLL-2003/middle_two"])
    with pytest.raises(InputError, match="give the slice of CoNLL-2003"):
        suite.suite_tasks(["CoNLL-2003/last"], {"CoNLL-2003/last": 10})
    assert suite.suite_tasks(["CoNLL-2003/last"], {"CoNLL-2003": 10})[0].train_slice == 10
    for protocol, argument in ((driver.Protocol(num_train_epochs=0), "num_train_epochs"),
                               (driver.Protocol(seeds=(0, 0)), "seeds")):
        with pytest.raises(InputError, match=argument):
            driver.check_protocol(protocol)
    from bert_tf.training.pretraining_evaluation import models
    with pytest.raises(InputError, match="gs://bucket/run: a remote path"):
        models.candidates(["gs://bucket/run"], resolve=None)
    (mrpc,) = suite.suite_tasks(["MRPC"])
    with pytest.raises(InputError, match="data_dir: gs://bucket/glue: a remote path"):
        mrpc.check_files({"data_dir": "gs://bucket/glue"})
    with pytest.raises(InputError, match="output_dir: gs://bucket/out: a remote path"):
        driver.evaluate([], [mrpc], {}, "gs://bucket/out")


def test_summary_means_and_spreads():
    from bert_tf.training.pretraining_evaluation import report
    scores = {("a", 10, "MRPC"): [80.0, 84.0, 83.0], ("a", 10, "RTE"): [55.0, 61.0, 58.0],
              ("a", -1, "MRPC"): [70.0, 71.0, 75.0], ("a", -1, "RTE"): [50.0, 52.0, 53.0]}
    rows = [dict(model=m, step=s, task=t, seed=k, score=v, metric="m", seconds=None,
                 vocabulary="v") for (m, s, t), values in scores.items()
            for k, v in enumerate(values)]
    summary = report.summarise(rows, ["MRPC", "RTE"])
    for step in (10, -1):
        assert summary[("a", step)]["average"] == pytest.approx(np.mean(
            [np.mean(scores[("a", step, t)]) for t in ("MRPC", "RTE")]))
    text = report.markdown(summary, ["MRPC", "RTE"], rows, False)
    mean, spread = np.mean(scores[("a", 10, "MRPC")]), np.std(scores[("a", 10, "MRPC")], ddof=1)
    assert f"| a | 10 | - | {mean:.1f} ± {spread:.1f} |" in text


def test_bad_input_is_refused_before_anything_is_written(pretraining_folders, small_data,
                                                         tmp_path):
    model = pretraining_folders["mlm"]
    out = tmp_path / "out"
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "bert_config.json").write_text((model / "bert_config.json").read_text())
    assert_refused(MODULE, evaluation_flags(empty, small_data, out), "--models", tmp_path)
    assert_refused(MODULE, evaluation_flags(model, small_data, out, tasks="MRPC,QQP"),
                   "unknown task 'QQP'", tmp_path)
    flags = evaluation_flags(model, small_data, out)
    del flags["conll_dir"]
    assert_refused(MODULE, flags, "--conll_dir: required by task CoNLL-2003", tmp_path)
    assert_refused(MODULE, evaluation_flags(model, small_data, out, tasks="SQuAD",
                                            squad_file=small_data["data_dir"] / "x.json"),
                   "--squad_file", tmp_path)
    # One example for a batch of 16: found while the slices and records are prepared, which
    # are then removed.
    assert_refused(MODULE, evaluation_flags(model, small_data, out,
                                            train_slices="MRPC=1,CoNLL-2003=40"),
                   "is no training step", tmp_path)
    # A model of another vocabulary (two tokens swapped, as its model directory records):
    # the scores would not compare.
    from bert_tf.text.vocabulary import vocabulary_sha256
    other = tmp_path / "other"
    shutil.copytree(model, other)
    vocab = (other / "vocab.txt").read_text(encoding="utf-8").splitlines()
    vocab[1000], vocab[1001] = vocab[1001], vocab[1000]
    (other / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    record = json.loads((other / "bert_tf_model.json").read_text())
    record["vocabulary_sha256"] = vocabulary_sha256(other / "vocab.txt")
    (other / "bert_tf_model.json").write_text(json.dumps(record))
    assert_refused(MODULE, evaluation_flags(f"{model},{other}", small_data, out),
                   "different vocabularies", tmp_path)
    assert not out.exists()
    # A folder of the user's that holds what an evaluation writes (a runs/ folder), but is not
    # one: refused, nothing in it replaced or deleted.
    theirs = tmp_path / "theirs"
    (theirs / "runs" / "mlm" / "step-2" / "MRPC" / "seed-0").mkdir(parents=True)
    (theirs / "runs" / "mlm" / "step-2" / "MRPC" / "seed-0" / "notes.txt").write_text("mine")
    assert_refused(MODULE, evaluation_flags(model, small_data, theirs), "not an evaluation",
                   tmp_path)
