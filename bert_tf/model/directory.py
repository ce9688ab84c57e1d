"""Model directories: a checkpoint with its config, vocabulary, casing and task beside it.

What `--init_checkpoint` (and `bert_tf.api.model_files`) takes as a whole model:
- a Hugging Face BERT directory: config.json, model.safetensors, vocab.txt, and the casing of
  its tokenizer_config.json;
- a keras-hub BERT preset: config.json, assets/tokenizer/vocabulary.txt and the casing of its
  tokenizer.json (bert_tf.model.keras_hub_preset.model_files);
  each with RECORD_FILE (the task, its labels) when export_savedmodel --format=huggingface or
  --format=keras_hub wrote it;
- a folder of checkpoints (the original's or ours) with CONFIG_FILE and VOCAB_FILE beside them,
  as Google's released models, and RECORD_FILE, ours: the casing, and for a folder a training
  run wrote, its task's name, max_seq_length and what the task's export records
  (`Task.export_description`: labels, multi_label and thresholds, SQuAD's options, ...).

A training run writes the three into its output_dir before its first checkpoint (`write`), so
the folder it leaves is a model directory: predict, export and further fine-tuning need only
`--init_checkpoint=FOLDER`. RECORD_FILE also records the architecture the weights were trained
with and a checksum of the vocabulary's tokens: a config or vocabulary changed in the folder
afterwards (heads or activation edited: every shape the same) is an InputError when the folder
is read (`check_record`). `find` locates the directory of the weights a run reads;
`bert_tf.api.resolve_model_files` takes config, vocabulary and casing from it, given files
winning only when they agree with it.
"""
import dataclasses
import json
import os
import shutil

import tensorflow as tf

from bert_tf.errors import InputError, arg, argument_error, file_error
from bert_tf.io_utils import atomic_open, atomic_output, checkpoint_folder, is_url
from bert_tf.model import keras_hub_preset
from bert_tf.model.checkpoints import hf_directory_files, resolve_checkpoint
from bert_tf.model.config import BertConfig
from bert_tf.text.vocabulary import same_vocabulary, vocabulary_sha256

CONFIG_FILE = "bert_config.json"
VOCAB_FILE = "vocab.txt"
RECORD_FILE = "bert_tf_model.json"


@dataclasses.dataclass
class ModelFolder:
    """What a model directory holds. `argument`: the argument that named it (init_checkpoint,
    or output_dir when a run continues its checkpoint); `config_file`, `vocab_file`: paths
    (None: absent); `do_lower_case`: the recorded casing (None: unknown); `record`:
    RECORD_FILE's object (None: absent); `vocab_place`: where its kind of directory holds
    the vocabulary (named when it is missing)."""
    path: str
    argument: str
    config: BertConfig = None
    config_file: str = None
    vocab_file: str = None
    do_lower_case: bool = None
    record: dict = None
    vocab_place: str = None


def find(init_checkpoint=None, output_dir=None):
    """The ModelFolder of the weights a run reads: output_dir's when it holds a checkpoint
    (the run continues it) and model files, else init_checkpoint's (a Hugging Face directory,
    a checkpoint folder, a checkpoint prefix's folder); None when that holds no model file."""
    if output_dir and tf.io.gfile.isdir(output_dir) and tf.train.latest_checkpoint(output_dir):
        folder = read(output_dir, "output_dir")
        if folder is not None:
            return folder
    if not init_checkpoint:
        return None
    described, vocab_name = hf_directory_files(init_checkpoint), VOCAB_FILE
    if described is None:
        described, vocab_name = (keras_hub_preset.model_files(init_checkpoint),
                                 keras_hub_preset.VOCABULARY_FILE)
    if described is not None:
        location = resolve_checkpoint(init_checkpoint)[1]
        config, vocab_file, do_lower_case = described
        # An export of ours (bert_tf.serving.huggingface, .keras_hub) records its task beside.
        record_file = os.path.join(location, RECORD_FILE)
        record = read_record(record_file) if tf.io.gfile.exists(record_file) else None
        return check_record(ModelFolder(location, "init_checkpoint", config,
                                        os.path.join(location, "config.json"), vocab_file,
                                        do_lower_case, record,
                                        os.path.join(location, vocab_name)))
    return read(checkpoint_folder(init_checkpoint), "init_checkpoint")


def read(path, argument):
    """The ModelFolder of checkpoint folder `path` (CONFIG_FILE, VOCAB_FILE, RECORD_FILE);
    None when it holds none of them."""
    config_file, vocab_file, record_file = (os.path.join(path, name) for name in
                                            (CONFIG_FILE, VOCAB_FILE, RECORD_FILE))
    found = [tf.io.gfile.exists(p) for p in (config_file, vocab_file, record_file)]
    if not any(found):
        return None
    record = read_record(record_file) if found[2] else None
    return check_record(ModelFolder(
        path, argument, BertConfig.from_json_file(config_file) if found[0] else None,
        config_file if found[0] else None, vocab_file if found[1] else None,
        record.get("do_lower_case") if record else None, record, vocab_file))


def check_record(folder):
    """`folder` (a ModelFolder), once its config and vocabulary are what its RECORD_FILE says
    the weights were trained with (when it says: the folders of our runs and exports); an
    InputError naming the file that differs otherwise."""
    record = folder.record or {}
    record_file = os.path.join(folder.path, RECORD_FILE)
    trained = record.get("architecture")
    if trained and folder.config is not None:
        differences = folder.config.architecture_differences(BertConfig.from_dict(trained))
        if differences:
            key, found, recorded = differences[0]
            raise file_error(folder.config_file, f"{key} {found} is not what the model in "
                                                 f"{folder.path} was trained with ({key} "
                                                 f"{recorded}, {record_file}): the config does "
                                                 f"not describe its weights")
    checksum = record.get("vocabulary_sha256")
    if checksum and folder.vocab_file and vocabulary_sha256(folder.vocab_file) != checksum:
        raise file_error(folder.vocab_file, f"is not the vocabulary the model in {folder.path} "
                                            f"was trained with (its tokens are not those whose "
                                            f"checksum {record_file} records)")
    return folder


def recorded_task(init_checkpoint):
    """The task that RECORD_FILE in init_checkpoint's folder names (None: none, or no such
    file), known before the checkpoint is read: a command line's option checks need it."""
    path = os.path.join(checkpoint_folder(init_checkpoint), RECORD_FILE)
    return read_record(path).get("task") if tf.io.gfile.exists(path) else None


def read_record(path):
    """RECORD_FILE's JSON object; InputError naming the file when it is not one."""
    with tf.io.gfile.GFile(path) as f:
        text = f.read()
    try:
        record = json.loads(text)
    except json.JSONDecodeError as e:
        raise file_error(path, f"not valid JSON: {e.msg}", e.lineno) from None
    if not isinstance(record, dict):
        raise file_error(path, "must hold a JSON object")
    return record


def task_record(task, do_lower_case=None, vocab_file=None):
    """What RECORD_FILE records of a run of `task` (a bert_tf.tasks.base.Task): its name,
    max_seq_length and export description, the architecture of its weights, and, with
    `vocab_file`, the vocabulary's checksum and `do_lower_case` (when known)."""
    record = {"task": task.name, "max_seq_length": task.config.max_seq_length,
              "architecture": task.config.bert_config.architecture()}
    record.update(task.export_description())
    if vocab_file:
        record["vocabulary_sha256"] = vocabulary_sha256(vocab_file)
        if do_lower_case is not None:
            record["do_lower_case"] = bool(do_lower_case)
    return record


def check_output_dir(output_dir, config=None, vocab_file=None):
    """Before any work of a training run: `write` can make output_dir a model directory. A
    CONFIG_FILE or VOCAB_FILE already there must describe the run's model (the same weights,
    the same tokens) unless `write` wrote it (RECORD_FILE beside it: a run of ours, rewritten);
    a user's other file is an InputError naming output_dir, and is never replaced."""
    if not output_dir or is_url(output_dir) or not os.path.isdir(output_dir):
        return
    if os.path.exists(os.path.join(output_dir, RECORD_FILE)):
        return
    config_file = os.path.join(output_dir, CONFIG_FILE)
    if config is not None and os.path.exists(config_file):
        try:
            differences = config.architecture_differences(BertConfig.from_json_file(config_file))
            why = ", ".join(f"{key} {ours} vs {theirs}" for key, ours, theirs in differences)
        except InputError as e:
            why = str(e)
        if why:
            raise argument_error("output_dir", f"{config_file} is not the config of this run's "
                                               f"model ({why}); it is not replaced: train into "
                                               f"another folder")
    existing_vocab = os.path.join(output_dir, VOCAB_FILE)
    if vocab_file and os.path.exists(existing_vocab) and not same_vocabulary(existing_vocab,
                                                                             vocab_file):
        raise argument_error("output_dir", f"{existing_vocab} is not this run's vocabulary "
                                           f"({arg('vocab_file')}={vocab_file}); it is not "
                                           f"replaced: train into another folder")


def write(output_dir, config=None, vocab_file=None, record=None):
    """Makes output_dir a model directory (after `check_output_dir`, which it repeats):
    CONFIG_FILE (the original's format), a copy of `vocab_file` as VOCAB_FILE, and `record` as
    RECORD_FILE, each written atomically. A user's file of the same model is left as it is;
    one written here before (RECORD_FILE beside it) is rewritten when it differs."""
    check_output_dir(output_dir, config, vocab_file)
    tf.io.gfile.makedirs(output_dir)
    ours = tf.io.gfile.exists(os.path.join(output_dir, RECORD_FILE))
    config_file = os.path.join(output_dir, CONFIG_FILE)
    if config is not None and (not tf.io.gfile.exists(config_file) or
                               ours and BertConfig.from_json_file(config_file) != config):
        config.to_json_file(config_file)
    copy = os.path.join(output_dir, VOCAB_FILE)
    if vocab_file and (not tf.io.gfile.exists(copy) or
                       ours and not same_vocabulary(copy, vocab_file)):
        with atomic_output(copy) as tmp:
            if is_url(tmp) or is_url(vocab_file):
                tf.io.gfile.copy(vocab_file, tmp, overwrite=True)
            else:
                shutil.copyfile(vocab_file, tmp)
    if record is not None:
        write_record(output_dir, record)


def write_record(output_dir, record):
    """Writes `record` as output_dir's RECORD_FILE (atomically)."""
    with atomic_open(os.path.join(output_dir, RECORD_FILE)) as f:
        f.write(json.dumps(record, indent=2, sort_keys=True) + "\n")


def differs(given, recorded):
    """Whether a given option's value differs from a recorded one (lists of labels or
    thresholds compared item by item, numbers as numbers)."""
    if isinstance(recorded, (list, tuple)) and isinstance(given, (list, tuple)):
        return len(given) != len(recorded) or any(differs(g, r) for g, r in zip(given, recorded))
    if isinstance(recorded, bool) or isinstance(given, bool):
        return bool(given) != bool(recorded)
    if isinstance(recorded, (int, float)):
        try:
            return float(given) != float(recorded)
        except (TypeError, ValueError):
            return True
    return given != recorded


def disagreement(argument, given, folder, key, recorded, given_by_argument=True):
    """The InputError of an argument against what model directory `folder` records of `key`:
    the argument's value (`given_by_argument`), or the `key` it leads to (a named task's
    labels)."""
    if not given_by_argument:
        return argument_error(argument, f"the model in {folder} was trained with {key} "
                                        f"{format_value(recorded)} ({RECORD_FILE}), not this "
                                        f"task's {format_value(given)}: use a model of this "
                                        f"task")
    return argument_error(argument, f"{format_value(given)} is not what the model in {folder} "
                                    f"was trained with ({key} {format_value(recorded)}, "
                                    f"{RECORD_FILE}): leave {arg(argument)} out to use it")


def format_value(value):
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)
