"""run.run_pretraining end to end (subprocesses): against the original, across strategies, resume.

- eval_results.txt for a checkpoint written by the original's run_pretraining (Adam slots and
  global_step included) equals the original's eval on the same records;
- training from the original's initial checkpoint gives, after N steps, the same eval results as
  N steps of the original's training (same batches, dropout off), also with dropout turned off by
  --dropout=0 on a config that has it, whose output folder keeps the config's dropout;
- a run of the original moved to ours mid-way (its output_dir) continues: N original steps + M of
  ours = N + M original steps (weights and Adam moments); LAMB refuses to continue it;
- OneDevice, Mirrored on 2 logical CPUs and MultiWorkerMirrored with 2 worker processes on
  127.0.0.1 give the same loss curve for the same global batch;
- a run killed with SIGKILL mid-way resumes from its last checkpoint and ends at num_train_steps;
- records that do not fit the flags stop the run with a one-line error naming the file.
"""
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

import pretraining_fixtures as fx
from conftest import (PROJECT_ROOT, assert_same_checkpoints, command_env, free_ports,
                      kill_a_worker_and_resume, read_eval_numbers)

pytestmark = pytest.mark.slow
# The config's dropout of the runs that --dropout changes (pretraining_fixtures' has none).
WITH_DROPOUT = {"hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1}


def command(config, inputs, output_dir, **flags):
    args = {"bert_config_file": config, "input_file": inputs, "output_dir": output_dir,
            "max_seq_length": fx.SEQ_LENGTH, "max_predictions_per_seq": fx.MAX_PREDICTIONS}
    args.update(flags)
    line = [sys.executable, "-m", "run.run_pretraining"]
    for name, value in args.items():
        if value is True:
            line.append(f"--{name}")
        else:
            line.append(f"--{name}={value}")
    return line


def start(line, env=None, log=None):
    environment = command_env(TF_CPP_MIN_LOG_LEVEL="2", **(env or {}))
    return subprocess.Popen(line, cwd=PROJECT_ROOT, env=environment, stdout=log or subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def run(line, env=None, timeout=240):
    process = start(line, env)
    output, _ = process.communicate(timeout=timeout)
    assert process.returncode == 0, output[-3000:]
    return output


def assert_same_results(ours, reference):
    assert sorted(ours) == sorted(reference)
    assert ours["global_step"] == reference["global_step"]
    for key in reference:
        np.testing.assert_allclose(ours[key], float(reference[key]), rtol=2e-5, err_msg=key)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    root = tmp_path_factory.mktemp("run_pretraining")
    fx.write_record_files(root, 2, 10)
    inputs = os.path.join(root, "records-*.tfrecord")
    # The original reads --input_file in the order tf.gfile.Glob lists it, which is the
    # directory's order, not sorted: the reference gets the files in that order too.
    return {"root": root, "config": fx.write_config(root), "inputs": inputs,
            "paths": tf.io.gfile.glob(inputs)}


def test_eval_and_training_match_the_original(workspace, refbert, monkeypatch):
    rp = fx.reference_run_pretraining(refbert, monkeypatch)
    original_dir = str(workspace["root"] / "original")
    # The original trains 3 steps (batches of 8 in file order, warmup 1, decay to 0 at step 3).
    checkpoint = fx.reference_train(rp, refbert, workspace["paths"], original_dir, steps=3,
                                    batch_size=8, save_initial=True, learning_rate=1e-3,
                                    num_train_steps=3, num_warmup_steps=1)
    reference = fx.reference_eval(rp, refbert, workspace["paths"], checkpoint,
                                  eval_batch_size=4, max_eval_steps=6)
    eval_flags = {"eval_batch_size": 4, "max_eval_steps": 6}
    ours_dir, flag_dir = (str(workspace["root"] / name) for name in ("ours", "dropout_flag"))
    os.makedirs(workspace["root"] / "with_dropout")
    config_with_dropout = fx.write_config(workspace["root"] / "with_dropout", **WITH_DROPOUT)
    original_eval = start(command(workspace["config"], workspace["inputs"], original_dir,
                                  do_eval=True, **eval_flags))
    train_flags = dict(do_train=True, do_eval=True, deterministic_input=True,
                       init_checkpoint=os.path.join(original_dir, "model.ckpt-0"),
                       train_batch_size=8, num_train_steps=3, num_warmup_steps=1,
                       learning_rate=1e-3, **eval_flags)
    ours_train = start(command(workspace["config"], workspace["inputs"], ours_dir,
                               **train_flags))
    flag_train = start(command(config_with_dropout, workspace["inputs"], flag_dir, dropout=0,
                               **train_flags))
    for process in (original_eval, ours_train, flag_train):
        output, _ = process.communicate(timeout=240)
        assert process.returncode == 0, output[-3000:]
    # Our eval of the original's checkpoint (found as the latest in --output_dir).
    assert_same_results(read_eval_numbers(os.path.join(original_dir, "eval_results.txt")),
                        reference)
    # Our 3 training steps from the original's initial weights = the original's 3 steps.
    assert_same_results(read_eval_numbers(os.path.join(ours_dir, "eval_results.txt")), reference)
    # --dropout=0 trains as a config without dropout; the model folder keeps the given config.
    assert_same_results(read_eval_numbers(os.path.join(flag_dir, "eval_results.txt")), reference)
    with open(os.path.join(flag_dir, "bert_config.json")) as f:
        kept = json.load(f)
    assert {key: kept[key] for key in WITH_DROPOUT} == WITH_DROPOUT


def test_continues_a_run_of_the_original(workspace, refbert, monkeypatch, tmp_path):
    """The original trains N=2 steps into --output_dir; ours continues it to N+M=4 steps (its
    weights, Adam moments and global_step, so the same learning rate); the result equals the
    original's 4 steps from the start. Batches of 10 in file order: every 2 steps see the same
    2 batches (one per file), so ours, whose input restarts, sees the original's batches 3 and 4.
    """
    import shutil
    from bert_tf.training import optimization, loops
    from bert_tf.model.variable_names import original_variable_map
    from bert_tf.model.config import BertConfig
    from bert_tf.model.models import BertPretrainer
    from bert_tf.tasks.pretraining.task import PretrainingTask

    rp = fx.reference_run_pretraining(refbert, monkeypatch)
    schedule = dict(learning_rate=1e-3, num_train_steps=4, num_warmup_steps=1)
    moved_dir, lamb_dir, full_dir = (str(tmp_path / name) for name in ("moved", "lamb", "full"))
    fx.reference_train(rp, refbert, workspace["paths"], moved_dir, steps=2, batch_size=10,
                       **schedule)
    full = fx.reference_train(rp, refbert, workspace["paths"], full_dir, steps=4,
                              batch_size=10, **schedule)
    shutil.copytree(moved_dir, lamb_dir)
    line = command(workspace["config"], workspace["inputs"], moved_dir, do_train=True,
                   deterministic_input=True, train_batch_size=10, save_checkpoints_steps=1,
                   **schedule)
    lamb = start(command(workspace["config"], workspace["inputs"], lamb_dir, do_train=True,
                         optimizer="lamb", **schedule))
    output = run(line)
    assert f"resuming from {moved_dir}/model.ckpt-2 at step 2" in output
    lamb_output, _ = lamb.communicate(timeout=120)
    assert lamb.returncode == 2, lamb_output[-3000:]
    assert lamb_output.strip().splitlines()[-1].startswith(
        "error: --optimizer: lamb: --output_dir holds a checkpoint of the original run_pretraining")
    assert tf.train.latest_checkpoint(moved_dir) == f"{moved_dir}/model.ckpt-4"

    # A rerun resumes from the newest checkpoint, ours (the original's model.ckpt-2 is older).
    model = BertPretrainer(BertConfig.from_dict(fx.TINY_CONFIG))
    optimizer = optimization.create_optimizer(schedule["learning_rate"], 4, 1)
    optimizer.build(model.trainable_variables)
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer)
    manager = tf.train.CheckpointManager(checkpoint, moved_dir, max_to_keep=5)
    assert loops.restore_latest(checkpoint, manager, model, optimizer, PretrainingTask()) == \
        f"{moved_dir}/model.ckpt-4"
    assert int(optimizer.iterations.numpy()) == 4
    # Our checkpoint at step 4 = the original's: weights and both Adam moments, part by part.
    reference = tf.train.load_checkpoint(full)
    compared = 0
    for part in original_variable_map(model):
        index = optimizer._get_variable_index(part.variable)
        for suffix, variable in (("", part.variable), ("/adam_m", optimizer._m[index]),
                                 ("/adam_v", optimizer._v[index])):
            value = variable.numpy()
            if part.index is not None:
                value = np.split(value, part.count, axis=-1)[part.index]
            expected = reference.get_tensor(part.name + suffix)
            np.testing.assert_allclose(value, expected, rtol=1e-4, atol=1e-7,
                                       err_msg=part.name + suffix)
            compared += 1
    assert compared == 3 * len(original_variable_map(model))
    # Steps 3 and 4 moved the weights: the original's step-2 weights are far from them.
    moved_from = tf.train.load_checkpoint(f"{moved_dir}/model.ckpt-2")
    name = "bert/encoder/layer_0/attention/self/key/kernel"
    assert np.abs(moved_from.get_tensor(name) - reference.get_tensor(name)).max() > 1e-4


def test_same_loss_curve_on_one_device_mirrored_and_multi_worker(workspace):
    root = workspace["root"]
    flags = dict(do_train=True, deterministic_input=True, train_batch_size=8, num_train_steps=4,
                 num_warmup_steps=1, learning_rate=1e-3, log_steps=1, seed=5)

    def line(name, **extra):
        return command(workspace["config"], workspace["inputs"], str(root / name), **flags, **extra)

    ports = free_ports(2)
    processes = [start(line("one_device")),
                 start(line("mirrored", distribution_strategy="mirrored", num_cpu_devices=2))]
    for index in range(2):
        tf_config = {"cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]},
                     "task": {"type": "worker", "index": index}}
        processes.append(start(line("multi_worker", distribution_strategy="multi_worker_mirrored"),
                               env={"TF_CONFIG": json.dumps(tf_config)}))
    for process in processes:
        output, _ = process.communicate(timeout=240)
        assert process.returncode == 0, output[-3000:]
    assert "2 replica(s)" in output  # the last worker ran with 2 replicas
    curves = {name: fx.loss_curve(root / name) for name in ("one_device", "mirrored", "multi_worker")}
    assert len(curves["one_device"]) == 4
    for name in ("mirrored", "multi_worker"):
        np.testing.assert_allclose(curves[name], curves["one_device"], rtol=1e-5, err_msg=name)
    assert not os.path.exists(root / "multi_worker" / ".worker_1")


def test_multi_worker_run_resumes_after_a_worker_is_killed(workspace):
    """Two MultiWorkerMirrored workers; one is killed after the first checkpoint, the other
    loses its peer; restarted, both resume from the last checkpoint (the input replayed to it:
    --seed) and end with the weights and Adam moments of an uninterrupted run."""
    root = workspace["root"]

    def line_into(output_dir):
        return command(workspace["config"], workspace["inputs"], str(output_dir), do_train=True,
                       train_batch_size=8, num_train_steps=60, num_warmup_steps=10,
                       save_checkpoints_steps=20, iterations_per_loop=20, log_steps=20, seed=3,
                       distribution_strategy="multi_worker_mirrored")

    step, output = kill_a_worker_and_resume(line_into, root / "mw_straight", root / "mw_killed",
                                            60)
    assert "2 replica(s)" in output and f"[train] done: {60 - step} steps" in output
    assert_same_checkpoints(root / "mw_straight" / "model.ckpt-60",
                            root / "mw_killed" / "model.ckpt-60")


def test_resume_after_kill_9(workspace):
    output_dir = workspace["root"] / "resumed"
    line = command(workspace["config"], workspace["inputs"], str(output_dir), do_train=True,
                   train_batch_size=4, num_train_steps=200, num_warmup_steps=10,
                   save_checkpoints_steps=20, iterations_per_loop=20, log_steps=20, seed=1)
    process = start(line, log=subprocess.DEVNULL)
    deadline = time.monotonic() + 180
    while not tf.train.latest_checkpoint(str(output_dir)):
        assert process.poll() is None, "run ended before its first checkpoint"
        assert time.monotonic() < deadline
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    killed_at = tf.train.latest_checkpoint(str(output_dir))
    saved_step = int(killed_at.rsplit("-", 1)[1])
    assert 20 <= saved_step < 200, "the run was not killed mid-way"
    output = run(line)
    assert f"resuming from {killed_at} at step {saved_step}" in output
    assert tf.train.latest_checkpoint(str(output_dir)).endswith("model.ckpt-200")
    assert f"[train] done: {200 - saved_step} steps" in output


def test_resumes_with_another_dropout(workspace, tmp_path):
    """A run continued with another --dropout (off for its first steps, then the config's 0.1,
    then off again) resumes from its checkpoint each time, though its dropout layers differ
    (none at rate 0)."""
    config = fx.write_config(tmp_path, **WITH_DROPOUT)
    output_dir = str(tmp_path / "out")
    flags = dict(do_train=True, train_batch_size=4, num_warmup_steps=1, save_checkpoints_steps=2,
                 seed=1)
    run(command(config, workspace["inputs"], output_dir, num_train_steps=2, dropout=0, **flags))
    for steps, dropout in ((4, {}), (6, {"dropout": 0})):
        output = run(command(config, workspace["inputs"], output_dir, num_train_steps=steps,
                             **dropout, **flags))
        resumed = os.path.join(output_dir, f"model.ckpt-{steps - 2}")
        assert f"resuming from {resumed} at step {steps - 2}" in output, output[-3000:]
        assert "[train] done: 2 steps" in output
        assert "Traceback" not in output
    assert tf.train.latest_checkpoint(output_dir).endswith("model.ckpt-6")


def test_bad_input_exits_with_a_message(workspace):
    process = start(command(workspace["config"], workspace["inputs"],
                            str(workspace["root"] / "bad"), do_train=True, max_seq_length=48))
    output, _ = process.communicate(timeout=120)
    assert process.returncode == 2
    assert output.strip().splitlines()[-1] == (
        f"error: {workspace['paths'][0]}: record 1: feature 'input_ids' has 32 values, expected "
        f"48 (do --max_seq_length=48 and --max_predictions_per_seq=5 match the data?)")
    assert "Traceback" not in output
