"""The files of a run's checkpoint folder: their names (model.ckpt-<step>, as the original's),
the throwaway folders of a multi-worker run's other workers, and the removal of what a
checkpoint write killed mid-way leaves behind."""
import os
import re
import shutil

from bert_tf.training.distribution import is_chief

CHECKPOINT_NAME = "model.ckpt"  # -> model.ckpt-<step>, as the original's checkpoints


def worker_checkpoint_dir(model_dir, strategy):
    """Non-chief workers must save too (collectives), but into a throwaway directory."""
    if is_chief(strategy):
        return model_dir
    return os.path.join(model_dir, f".worker_{strategy.cluster_resolver.task_id}")


# What TF's checkpoint writers leave when killed mid-write (TF 2.21, killed with kill -9):
# the sharded saver writes `<prefix>_temp/part-00000-of-00001{.index,.data-...}` (the data
# under a `.tempstate<n>` name while it is written) and then merges them into `<prefix>.index`
# and `<prefix>.data-...`, deleting the directory; the CheckpointManager's state file is
# written as `checkpoint.tmp<32 hex>` and renamed over `checkpoint`.
_DEAD_WRITE = re.compile(
    rf"^(?:{re.escape(CHECKPOINT_NAME)}-\d+_temp|checkpoint\.tmp[0-9a-f]{{32}})$")


# What a CheckpointManager writes into its directory: model.ckpt-<step>.{index,data-...}, the
# `checkpoint` state file, and what a killed write leaves (_DEAD_WRITE).
# A finished checkpoint's files, the step as group 1.
CHECKPOINT_FILE = re.compile(
    rf"^{re.escape(CHECKPOINT_NAME)}-(\d+)(?:\.index|\.data-\d+-of-\d+)$")


def remove_worker_checkpoints(directory):
    """Removes a non-chief worker's throwaway checkpoints (`worker_checkpoint_dir`): the files
    its CheckpointManager wrote, then the directory if that leaves it empty. Anything else in
    it is not ours and stays."""
    if not os.path.isdir(directory):
        return
    remove_dead_checkpoint_writes(directory)
    remove_own_files(directory, lambda name: name == "checkpoint" or CHECKPOINT_FILE.match(name))


def remove_own_files(directory, ours):
    """Removes the regular files of `directory` whose names `ours(name)` says we wrote, then
    the directory if that leaves it empty; anything else in it is not ours and stays."""
    for name in os.listdir(directory):
        path = os.path.join(directory, name)
        if ours(name) and os.path.isfile(path) and not os.path.islink(path):
            os.remove(path)
    if not os.listdir(directory):
        os.rmdir(directory)


def remove_dead_checkpoint_writes(model_dir):
    """Removes what checkpoint writes killed mid-way left in `model_dir` (the chief's
    directory); returns the removed paths. Call at the start of training only.

    The rule, and why it cannot remove a write in progress:
    - only `model_dir` itself is looked at: other workers of a multi-worker run write into
      their own `.worker_<id>` subdirectories (`worker_checkpoint_dir`), never looked into
      (and removed whole by their worker when it finishes);
    - only names TF's writers give their temporary output (`model.ckpt-<step>_temp`
      directories holding nothing but `part-*` files, `checkpoint.tmp<32 hex>` files); a
      finished write leaves neither, so none of them is part of a complete checkpoint;
    - only at the start of the chief's training, before it saves anything: the chief is the
      one process that writes checkpoints into model_dir, so any such name there now was left
      by an earlier, dead writer. (Two runs training into one output_dir at once would be
      the exception; CheckpointManager does not support that either: they would delete each
      other's checkpoints and overwrite the state file.)
    """
    if "://" in str(model_dir) or not os.path.isdir(model_dir):
        return []
    removed = []
    for name in sorted(os.listdir(model_dir)):
        if not _DEAD_WRITE.match(name):
            continue
        path = os.path.join(model_dir, name)
        try:
            if os.path.islink(path):
                continue
            if os.path.isdir(path):
                if not all(part.startswith("part-") for part in os.listdir(path)):
                    continue  # not what TF writes there: leave it to the user
                shutil.rmtree(path)
            else:
                os.remove(path)
        except OSError:
            continue
        removed.append(path)
    return removed
