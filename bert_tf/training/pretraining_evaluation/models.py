"""What is evaluated: `Candidate`s, one per checkpoint of a pretraining run's folder (every
model.ckpt-<step>, or those of `steps`) or per other model directory (a Hugging Face
directory, a keras-hub preset, Google's released folder, a checkpoint prefix), and the
randomly initialised baseline of each config and vocabulary (step -1)."""
import dataclasses
import functools
import glob
import hashlib
import os
import re
import typing

from bert_tf.errors import InputError, arg, argument_error
from bert_tf.io_utils import is_url
from bert_tf.text.vocabulary import vocabulary_sha256
from bert_tf.training.checkpoint_files import CHECKPOINT_FILE, CHECKPOINT_NAME

BASELINE_STEP = -1
_EVENTS = re.compile(r"events\.out\.tfevents\.(\d+)\.")


@dataclasses.dataclass(frozen=True)
class Candidate:
    """model: the table's name (the folder's); step: the checkpoint's (0: a model directory's
    weights; BASELINE_STEP: a fresh initialisation); files: its bert_tf.api.ModelFiles
    (checkpoint None for the baseline); seconds: wall-clock seconds from the pretraining run's
    first start to the checkpoint (None: not known)."""
    model: str
    step: int
    files: typing.Any
    seconds: typing.Optional[float] = None

    # Read once: every run's key, folder and row asks for them.
    @functools.cached_property
    def vocabulary(self):
        return vocabulary_sha256(self.files.vocab_file)

    @functools.cached_property
    def config_key(self):
        """What a random initialisation is of: the config, the vocabulary and the casing."""
        text = (f"{self.files.config.to_json_string()} {self.vocabulary} "
                f"{self.files.do_lower_case}")
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def checkpoint_steps(folder):
    """The steps of the checkpoints (model.ckpt-<step>.index) a pretraining run left in
    `folder`, ascending."""
    if not os.path.isdir(folder):
        return []
    return sorted(int(match.group(1)) for match in map(CHECKPOINT_FILE.match, os.listdir(folder))
                  if match and match.group(0).endswith(".index"))


def _run_start(folder):
    """The run's first start: its earliest TensorBoard events file's time stamp (None: none)."""
    stamps = [int(match.group(1)) for path in glob.glob(os.path.join(folder, "*", "events.*"))
              if (match := _EVENTS.match(os.path.basename(path)))]
    return min(stamps) if stamps else None


def _resolve(resolve, path):
    """The ModelFiles of `path`; what makes it no model is an InputError naming `models`."""
    try:
        return resolve(path)
    except InputError as error:
        message = str(error)
        if error.argument and message.startswith(f"{arg(error.argument)}: "):
            message = message[len(arg(error.argument)) + 2:]
        raise argument_error("models", message if path in message
                             else f"{path}: {message}") from None


def check_local(path, argument):
    """An InputError naming `argument` when `path` is remote (gs://...): evaluate_pretraining
    lists folders, reads checkpoint times and keeps its own files with os, which would take a
    remote path for a local one that does not exist."""
    if is_url(os.fspath(path)):
        raise argument_error(argument, f"{path}: a remote path; evaluate_pretraining reads and "
                                       f"writes local files (copy it here first)")


def candidates(paths, resolve, steps=None):
    """The Candidates of `paths`, each named after its folder (a checkpoint prefix's folder):
    every checkpoint of a pretraining folder (those of `steps`, when given), or one of its
    checkpoints given as a prefix; one for any other model directory or checkpoint (steps do
    not apply). `resolve(path)` gives a path's ModelFiles (bert_tf.api.model_files). A path
    that holds no model, a step a folder does not have, or two folders of one name are an
    InputError naming `models` (or `steps`); a checkpoint given twice counts once."""
    found, folders = {}, {}
    for given in paths:
        check_local(given, "models")
        path = os.path.abspath(os.fspath(given))
        folder = path if os.path.isdir(path) else os.path.dirname(path)
        name = os.path.basename(folder)
        if folders.setdefault(name, folder) != folder:
            raise argument_error("models", f"two models named {name!r} ({folders[name]}, "
                                           f"{folder}): give folders of different names")
        available = checkpoint_steps(folder)
        prefix_step = re.fullmatch(rf"{re.escape(CHECKPOINT_NAME)}-(\d+)", os.path.basename(path))
        if available and (path == folder or prefix_step):
            wanted = ([int(prefix_step.group(1))] if prefix_step and path != folder
                      else sorted(steps) if steps else available)
            missing = [step for step in wanted if step not in available]
            if missing:
                raise argument_error("steps" if path == folder else "models",
                                     f"{folder} has no checkpoint of step "
                                     f"{', '.join(map(str, missing))} (it has "
                                     f"{', '.join(map(str, available))})")
            start = _run_start(folder)
            for step in wanted:
                prefix = os.path.join(folder, f"{CHECKPOINT_NAME}-{step}")
                seconds = (None if start is None
                           else max(0.0, os.path.getmtime(prefix + ".index") - start))
                found.setdefault((name, step), Candidate(name, step, _resolve(resolve, prefix),
                                                         seconds))
            continue
        if not os.path.exists(path) and not glob.glob(path + ".*"):
            raise argument_error("models", f"{path}: no such folder or checkpoint")
        files = _resolve(resolve, path)
        if files.checkpoint is None:
            raise argument_error("models", f"{path}: holds no checkpoint")
        found.setdefault((name, 0), Candidate(name, 0, files))
    return list(found.values())


def check_vocabularies(found, mixed_allowed):
    """Models of different vocabularies in one table are an InputError naming `models`, unless
    `mixed_allowed` (the table then shows each model's)."""
    vocabularies = {}
    for candidate in found:
        vocabularies.setdefault(candidate.vocabulary, candidate)
    if len(vocabularies) > 1 and not mixed_allowed:
        first, other = list(vocabularies.values())[:2]
        raise argument_error("models", f"{first.model} and {other.model} have different "
                                       f"vocabularies ({first.files.vocab_file}, "
                                       f"{other.files.vocab_file}): their scores are not "
                                       f"comparable; give {arg('mixed_vocabularies')} to "
                                       f"tabulate them anyway, each with its vocabulary")


def baselines(found):
    """One fresh initialisation per config and vocabulary of `found`, named after the first
    model that has them."""
    seen = {}
    for candidate in found:
        seen.setdefault(candidate.config_key, Candidate(
            candidate.model, BASELINE_STEP, dataclasses.replace(candidate.files,
                                                                checkpoint=None)))
    return list(seen.values())
