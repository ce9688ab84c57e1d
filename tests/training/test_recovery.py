"""Recovery from what a killed run leaves behind, and from damaged checkpoints.

- A checkpoint write killed mid-way (kill -9) leaves `model.ckpt-<step>_temp/` (its part files,
  the data still under a `.tempstate<n>` name) and possibly `checkpoint.tmp<32 hex>` (the
  state file being replaced) in --output_dir. That is what TF 2.21 left when a saving process
  was killed with SIGKILL during development; the tests plant the same names. A resumed run
  removes them, and only them: the complete checkpoints are intact (same bytes), a
  non-chief worker's directory and a user's look-alike directory stay.
- A damaged checkpoint (its `.index` cut or overwritten, its `.data-*` truncated, corrupted
  or missing), whether given as --init_checkpoint (bert_tf.model.checkpoints.load_checkpoint; the
  command lines' cases are in test_finetuning_errors.py) or the latest in --output_dir that a
  run resumes from (bert_tf.training.loops.restore_latest): an InputError naming the damaged file,
  no file touched.
"""
import json

import pytest

from conftest import run_command_line

TINY = {"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
        "intermediate_size": 64, "max_position_embeddings": 64, "type_vocab_size": 2}
STATE_TEMPORARY = "checkpoint.tmp" + "0123456789abcdef" * 2


def plant_dead_writes(model_dir, step):
    """What a writer of checkpoint `step` killed mid-write leaves; returns the paths."""
    temp = model_dir / f"model.ckpt-{step}_temp"
    temp.mkdir()
    (temp / "part-00000-of-00001.data-00000-of-00001.tempstate15795773603037455810").write_bytes(
        b"\0" * 4096)
    (model_dir / STATE_TEMPORARY).write_text('model_checkpoint_path: "model.ckpt-1"\n')
    return [temp, model_dir / STATE_TEMPORARY]


def plant_look_alikes(model_dir, step):
    """Names that are not a dead write of this directory's chief: a worker's directory (its
    own writer's business), a user's directory with other files, a near miss."""
    kept = []
    worker = model_dir / ".worker_1" / f"model.ckpt-{step}_temp"
    worker.mkdir(parents=True)
    (worker / "part-00000-of-00001.index").write_bytes(b"x")
    kept.append(worker / "part-00000-of-00001.index")
    mine = model_dir / f"model.ckpt-{step + 1}_temp"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    kept.append(mine / "notes.txt")
    (model_dir / "checkpoint.tmp-notes").write_text("mine")
    kept.append(model_dir / "checkpoint.tmp-notes")
    return kept


def test_remove_dead_checkpoint_writes_takes_only_dead_writes(tmp_path):
    from bert_tf.training.checkpoint_files import remove_dead_checkpoint_writes
    (tmp_path / "model.ckpt-2.index").write_bytes(b"index")
    (tmp_path / "model.ckpt-2.data-00000-of-00001").write_bytes(b"data")
    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-2"\n')
    dead = plant_dead_writes(tmp_path, 3)
    kept = plant_look_alikes(tmp_path, 3)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}

    assert sorted(remove_dead_checkpoint_writes(str(tmp_path))) == sorted(map(str, dead))
    after = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert after == {p: b for p, b in before.items() if not any(
        p == d or d in p.parents for d in dead)}
    assert all(p.exists() for p in kept)
    assert remove_dead_checkpoint_writes(str(tmp_path)) == []
    assert remove_dead_checkpoint_writes(str(tmp_path / "absent")) == []


@pytest.fixture(scope="module")
def classifier_files(tmp_path_factory, uncased_vocab):
    root = tmp_path_factory.mktemp("recovery")
    (root / "bert_config.json").write_text(json.dumps(TINY))
    data = root / "tsv"
    data.mkdir()
    (data / "train.tsv").write_text("a good movie\tpos\nbad\tneg\nfine film\tpos\nawful\tneg\n")
    (data / "dev.tsv").write_text("nice\tpos\nboring\tneg\n")
    return {"root": root, "vocab": str(uncased_vocab), "config": str(root / "bert_config.json"),
            "data": str(data)}


def classifier_flags(files, output_dir, **flags):
    base = {"vocab_file": files["vocab"], "bert_config_file": files["config"],
            "output_dir": output_dir, "max_seq_length": 16, "task_name": "tsv",
            "text_a_column": 0, "label_column": 1, "data_dir": files["data"],
            "train_batch_size": 2, "save_checkpoints_steps": 1, "do_train": True}
    base.update(flags)
    return base


@pytest.mark.slow
def test_resumed_run_removes_a_killed_checkpoint_write(classifier_files, tmp_path):
    """Train 2 steps (checkpoints 1 and 2); plant what a run killed while writing checkpoint 3
    leaves; rerun for 4 steps: it resumes from 2, removes the dead write (and says so), keeps
    everything else, and saves 3 and 4."""
    import tensorflow as tf
    output_dir = tmp_path / "out"
    status, output = run_command_line("run.run_classifier", classifier_flags(
        classifier_files, output_dir, num_train_epochs=1))
    assert status == 0, output[-3000:]
    assert tf.train.latest_checkpoint(str(output_dir)).endswith("model.ckpt-2")
    dead = plant_dead_writes(output_dir, 3)
    kept = plant_look_alikes(output_dir, 3)
    before = {p: p.read_bytes() for p in output_dir.rglob("*")
              if p.is_file() and not any(p == d or d in p.parents for d in dead)}
    checkpoint_files = [p for p in before if p.name.startswith("model.ckpt-")
                        and ".worker_1" not in str(p) and not p.name.endswith("_temp")]
    assert len(checkpoint_files) == 4  # index and data of steps 1 and 2

    status, output = run_command_line("run.run_classifier", classifier_flags(
        classifier_files, output_dir, num_train_epochs=2))
    assert status == 0, output[-3000:]
    assert f"resuming from {output_dir}/model.ckpt-2 at step 2" in output
    for path in dead:
        assert not path.exists()
        assert f"removed {path}: left by a checkpoint write that did not finish" in output
    assert all(p.exists() for p in kept)
    for path in checkpoint_files:  # the checkpoints written before: the same bytes
        assert path.read_bytes() == before[path], path
    for path in before:
        assert path.exists(), path
    assert tf.train.latest_checkpoint(str(output_dir)).endswith("model.ckpt-4")
    reader = tf.train.load_checkpoint(str(output_dir / "model.ckpt-2"))
    assert int(reader.get_tensor("optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE")) == 2


DAMAGES = {
    "index cut to 10 bytes": (".index", lambda b: b[:10], "damaged checkpoint index file: "
                              "cannot be read (file is too short to be an sstable)"),
    "index cut in half": (".index", lambda b: b[:len(b) // 2], "damaged checkpoint index file: "
                          "cannot be read (not an sstable (bad magic number))"),
    "index overwritten": (".index", lambda b: b[:len(b) // 2] + b"\xff" * 16 + b[len(b) // 2 + 16:],
                          "damaged checkpoint index file: cannot be read (Unable to read file"),
    "data truncated": (".data-00000-of-00001", lambda b: b[:len(b) // 2],
                       "damaged checkpoint data file: cannot be read (Read less bytes than "
                       "requested)"),
    "data empty": (".data-00000-of-00001", lambda b: b"", "damaged checkpoint data file: "
                   "cannot be read (Read less bytes than requested)"),
    "data overwritten": (".data-00000-of-00001",
                         lambda b: b[:len(b) // 2] + b"\xff" * 16 + b[len(b) // 2 + 16:],
                         "damaged checkpoint data file: cannot be read (TensorBundle at "),
    "data missing": (".data-00000-of-00001", None, "checkpoint data file not found (the index "
                     "file is there)"),
}


def damage(prefix, how):
    """Damages checkpoint `prefix` as DAMAGES[how] says; returns (damaged file, message)."""
    suffix, change, message = DAMAGES[how]
    path = prefix.parent / (prefix.name + suffix)
    if change is None:
        path.unlink()
    else:
        path.write_bytes(change(path.read_bytes()))
    return path, message


@pytest.fixture(scope="module")
def tiny_encoder():
    from bert_tf.model.config import BertConfig
    from bert_tf.model.encoder import BertEncoder
    return lambda: BertEncoder(BertConfig.from_dict(TINY))


@pytest.mark.parametrize("checkpoint_format", ["tf1", "tf2"])
@pytest.mark.parametrize("how", list(DAMAGES))
def test_damaged_init_checkpoint_is_named(tiny_encoder, tmp_path, checkpoint_format, how):
    import tensorflow as tf

    from bert_tf.model.checkpoints import load_checkpoint, write_tf1_checkpoint
    from bert_tf.errors import InputError
    encoder = tiny_encoder()
    if checkpoint_format == "tf1":
        prefix = write_tf1_checkpoint(encoder, tmp_path / "model.ckpt")
    else:
        prefix = tf.train.Checkpoint(model=encoder).write(str(tmp_path / "ckpt"))
    assert load_checkpoint(tiny_encoder(), prefix).loaded  # intact: loads
    path, message = damage(tmp_path / prefix.rsplit("/", 1)[1], how)
    before = {p: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(InputError) as raised:
        load_checkpoint(tiny_encoder(), prefix)
    assert str(raised.value).startswith(f"{path}: {message}")
    assert "\n" not in str(raised.value)
    assert {p: p.read_bytes() for p in tmp_path.iterdir()} == before


@pytest.mark.parametrize("how", ["index cut to 10 bytes", "data truncated", "data missing"])
def test_resuming_from_a_damaged_latest_checkpoint_names_it(tiny_encoder, tmp_path, how):
    """The latest checkpoint in the output dir, damaged: loops.restore_latest raises an
    InputError naming the file (the user can remove that checkpoint and resume from the one
    before), instead of TF's OpError."""
    import keras
    import tensorflow as tf

    from bert_tf.training import checkpoint_files, loops
    from bert_tf.errors import InputError

    def manager_of():
        encoder = tiny_encoder()
        optimizer = keras.optimizers.Adam()
        optimizer.build(encoder.trainable_variables)
        checkpoint = tf.train.Checkpoint(model=encoder, optimizer=optimizer)
        return encoder, optimizer, checkpoint, tf.train.CheckpointManager(
            checkpoint, str(tmp_path), max_to_keep=5,
            checkpoint_name=checkpoint_files.CHECKPOINT_NAME)

    encoder, optimizer, checkpoint, manager = manager_of()
    manager.save(checkpoint_number=1)
    manager.save(checkpoint_number=2)
    path, message = damage(tmp_path / "model.ckpt-2", how)
    before = {p: p.read_bytes() for p in tmp_path.iterdir()}
    encoder, optimizer, checkpoint, manager = manager_of()
    with pytest.raises(InputError) as raised:
        loops.restore_latest(checkpoint, manager, encoder, optimizer)
    assert str(raised.value).startswith(f"{path}: {message}")
    assert {p: p.read_bytes() for p in tmp_path.iterdir()} == before


@pytest.mark.parametrize("how", ["index cut to 10 bytes", "data truncated"])
def test_evaluating_a_damaged_latest_checkpoint_names_it(tiny_encoder, tmp_path, how):
    """Eval/predict without training read the latest checkpoint of the output dir
    (restore.restore_for_inference): damaged, it is an InputError naming the file."""
    import keras
    import tensorflow as tf

    from bert_tf.training import checkpoint_files, restore
    from bert_tf.training.settings import RunSettings
    from bert_tf.errors import InputError
    from bert_tf.tasks.encoder.task import EncoderConfig, EncoderTask

    encoder = tiny_encoder()
    optimizer = keras.optimizers.Adam()
    optimizer.build(encoder.trainable_variables)
    checkpoint = tf.train.Checkpoint(model=encoder, optimizer=optimizer)
    tf.train.CheckpointManager(checkpoint, str(tmp_path), max_to_keep=5,
                               checkpoint_name=checkpoint_files.CHECKPOINT_NAME).save(
        checkpoint_number=3)
    path, message = damage(tmp_path / "model.ckpt-3", how)
    settings = RunSettings(output_dir=str(tmp_path), do_eval=True)
    with pytest.raises(InputError) as raised:
        restore.restore_for_inference(EncoderTask(EncoderConfig()), tiny_encoder(), optimizer,
                                     settings, log=lambda message: None)
    assert str(raised.value).startswith(f"{path}: {message}")


def test_a_workers_throwaway_checkpoints_are_removed_and_nothing_else(tiny_encoder, tmp_path):
    """A non-chief worker's checkpoint directory: what its CheckpointManager wrote (checkpoints,
    state file, a killed write) is removed, and the directory with it; a file that is not ours
    stays, and so does the directory then."""
    import tensorflow as tf

    from bert_tf.training import checkpoint_files

    def save_into(directory):
        checkpoint = tf.train.Checkpoint(model=tiny_encoder())
        manager = tf.train.CheckpointManager(checkpoint, str(directory), max_to_keep=2,
                                             checkpoint_name=checkpoint_files.CHECKPOINT_NAME)
        for step in (1, 2):
            manager.save(checkpoint_number=step)
        (directory / "model.ckpt-3_temp").mkdir()
        (directory / "model.ckpt-3_temp" / "part-00000-of-00001.index").write_bytes(b"x")

    only_ours = tmp_path / ".worker_1"
    save_into(only_ours)
    checkpoint_files.remove_worker_checkpoints(str(only_ours))
    assert not only_ours.exists()

    shared = tmp_path / ".worker_2"
    save_into(shared)
    (shared / "notes.txt").write_text("mine")
    checkpoint_files.remove_worker_checkpoints(str(shared))
    assert sorted(p.name for p in shared.iterdir()) == ["notes.txt"]
