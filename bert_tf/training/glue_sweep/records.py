"""What a sweep prepares once and checks when it starts again: each task's records
(<task>/records, `prepared.json` once complete, with the fingerprint of what they were made
from: the data files' sizes and SHA-256, the vocabulary's, the casing and max_seq_length) and
the run settings every run shares (sweep.json)."""
import hashlib
import json
import math
import os
import time

from bert_tf import io_utils
from bert_tf.errors import arg, file_error
from bert_tf.tasks.base import Records
from bert_tf.tasks.classification import reader
from bert_tf.tasks.classification.task import prepare_task
from bert_tf.tasks.preprocessor import read_splits
from bert_tf.training.glue_sweep.tasks import test_set_processor

PREPARED_FILE = "prepared.json"
SWEEP_FILE = "sweep.json"
RUN_RESULT_FILE = "run_result.json"


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def data_fingerprint(source_folder):
    """Each .tsv file of `source_folder`: [its size, its SHA-256]."""
    return {name: [os.path.getsize(os.path.join(source_folder, name)),
                   _sha256(os.path.join(source_folder, name))]
            for name in sorted(os.listdir(source_folder)) if name.endswith(".tsv")}


def check_prepared_inputs(records_folder, inputs):
    """An InputError naming the records' PREPARED_FILE when an earlier sweep prepared them from
    other inputs (`inputs`: its data's `data_fingerprint`, the vocabulary's SHA-256, the casing
    and max_seq_length): the runs would train on stale records."""
    marker = os.path.join(records_folder, PREPARED_FILE)
    recorded = read_json(marker).get("inputs")
    if recorded != inputs:
        changed = sorted(key for key in inputs if (recorded or {}).get(key) != inputs[key])
        raise file_error(marker, f"an earlier sweep prepared these records from other inputs "
                                 f"({', '.join(changed)} differ): give a new "
                                 f"{arg('output_dir')}, or remove {records_folder} to prepare "
                                 f"them again")


def check_sweep_settings(output_dir, settings):
    """An InputError naming output_dir/SWEEP_FILE when an earlier sweep there recorded other
    run settings than `settings` (the ones every run shares: init_checkpoint, seed, optimizer,
    ...): its finished runs would be reused beside runs of other settings. Returns `settings`
    as recorded (JSON)."""
    settings = json.loads(json.dumps(settings, sort_keys=True, default=str))
    path = os.path.join(output_dir, SWEEP_FILE)
    if os.path.exists(path):
        recorded = read_json(path)
        changed = sorted(key for key in set(recorded) | set(settings)
                         if recorded.get(key) != settings.get(key))
        if changed:
            raise file_error(path, f"an earlier sweep in this output_dir ran with other "
                                   f"settings ({', '.join(changed)} differ): give a new "
                                   f"{arg('output_dir')}, or the same settings to continue it")
    return settings


def write_json(path, value):
    with io_utils.atomic_open(path) as f:
        json.dump(value, f, indent=1, sort_keys=True)
        f.write("\n")


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def json_number(value):
    """A result value as a JSON number (NaN: None)."""
    value = float(value)
    return value if math.isfinite(value) else None


class TaskRecords:
    """The records of the sweep's tasks in output_dir/<task>/records (and a folder of their
    own for a task's other test sets), each folder's fingerprint computed once (a folder's
    data, MNLI's serving three test sets, and the vocabulary read once). `options`:
    `prepare_task`'s (eval and predict batch sizes, log, the task's options)."""

    def __init__(self, output_dir, files, tokenizer, max_seq_length, options):
        self.output_dir, self.files, self.tokenizer = output_dir, files, tokenizer
        self.max_seq_length, self.options = max_seq_length, options
        self.model_inputs = {"vocab_file": _sha256(files.vocab_file),
                             "do_lower_case": bool(files.do_lower_case),
                             "max_seq_length": max_seq_length}
        self._folder_data = {}
        self.inputs = {}  # records folder -> its fingerprint

    def folder(self, data, test_set=None):
        folder = os.path.join(self.output_dir, data.task.name, "records")
        return folder if test_set is None else os.path.join(
            folder, os.path.splitext(test_set.submission)[0])

    @staticmethod
    def is_prepared(folder):
        return os.path.exists(os.path.join(folder, PREPARED_FILE))

    def fingerprint(self, source_folder):
        if source_folder not in self._folder_data:
            self._folder_data[source_folder] = data_fingerprint(source_folder)
        return dict(self.model_inputs, data=self._folder_data[source_folder])

    def read(self, found):
        """{task name or submission: {mode: examples}} of every records folder not prepared by
        an earlier sweep, every file read and checked before any record is written; the
        folders an earlier sweep prepared checked against their inputs."""
        examples = {}
        for data in found:
            self.inputs[self.folder(data)] = self.fingerprint(data.folder)
            if not self.is_prepared(self.folder(data)):
                examples[data.task.name] = read_splits(reader.get_processor(data.task.processor),
                                                       data.folder, ("train", "eval", "predict"))
            for test_set in data.task.test_sets[1:]:
                if test_set.submission in data.indices:
                    processor, folder = test_set_processor(data, test_set)
                    self.inputs[self.folder(data, test_set)] = self.fingerprint(folder)
                    if not self.is_prepared(self.folder(data, test_set)):
                        examples[test_set.submission] = read_splits(processor, folder,
                                                                    ("predict",))
        for folder, fingerprint in self.inputs.items():
            if self.is_prepared(folder):
                check_prepared_inputs(folder, fingerprint)
        return examples

    def prepare(self, data, splits, folder, check_model=None):
        """The records of `splits` in `folder`, written now unless an earlier sweep did (its
        PREPARED_FILE); ({mode: Records}, num_train, seconds spent preparing)."""
        marker = os.path.join(folder, PREPARED_FILE)
        labels = reader.get_processor(data.task.processor).get_labels()
        started = time.monotonic()
        if self.is_prepared(folder):
            record = read_json(marker)
        else:
            prepared = prepare_task(self.files.config, splits, labels, self.tokenizer,
                                    self.max_seq_length, folder, task_name=data.task.processor,
                                    check_model=check_model,
                                    # Each run counts its own steps (`check_steps` checked
                                    # them); prepare's count of one epoch at batch 1 is unused.
                                    train_batch_size=1, num_train_epochs=1.0, **self.options)
            record = {"num_train": prepared.num_train, "seconds": time.monotonic() - started,
                      "inputs": self.inputs[folder],
                      "records": {mode: [os.path.basename(r.paths[0]), r.count]
                                  for mode, r in prepared.task.config.records.items()}}
            write_json(marker, record)
        records = {mode: Records((os.path.join(folder, file_name),), count)
                   for mode, (file_name, count) in record["records"].items()}
        return records, record["num_train"], record["seconds"]
