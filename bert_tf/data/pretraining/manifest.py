"""The manifest beside pretraining records: how they were made (recipe, objective, masking and its
rate, layout, lengths, the vocabulary's checksum and casing, the tool's version) and which files,
so that run_pretraining takes its settings from the records and refuses what contradicts them.

create_pretraining_data writes, in each folder of its output files, `<first file>.manifest.json`
and `<first file>.vocab.txt`, a copy of its vocabulary, once the records are in place
(`write`); run_pretraining finds the manifests of its input files (`read_records`). No
TensorFlow.
"""
import dataclasses
import json
import os
import re
import shutil

from bert_tf import __version__, io_utils
from bert_tf.data.pretraining.record_layout import PretrainingLayout
from bert_tf.errors import arg, argument_error, file_error
from bert_tf.text.vocabulary import tokens_sha256, vocab_lines, vocabulary_sha256

SUFFIX = ".manifest.json"
VOCABULARY_SUFFIX = ".vocab.txt"
FORMAT = "bert_tf pretraining records"
# What the records of one run must agree on; the rest (files, counts, seed) may differ between
# the manifests of one run's folders, or of shards made by separate runs with the same flags.
SETTINGS = ("recipe", "objective", "masking", "masked_lm_prob", "max_predictions_per_seq",
            "do_whole_word_mask", "cut", "max_seq_length", "pack_sequences",
            "max_sequences_per_row", "vocabulary_sha256", "vocab_size", "mask_id",
            "do_lower_case")
_SHARD = re.compile(r"-\d{5}-of-\d{5}$")


def manifest_paths(output_files):
    """{manifest path: the output files it lists}: one manifest per folder of `output_files`,
    named after its first file there (a shard's name without its -0000i-of-0000N)."""
    by_folder = {}
    for path in output_files:
        by_folder.setdefault(os.path.dirname(path), []).append(path)
    return {_SHARD.sub("", files[0]) + SUFFIX: files for files in by_folder.values()}


def vocabulary_copy(manifest_file):
    """The path of the vocabulary's copy beside a manifest."""
    return manifest_file[:-len(SUFFIX)] + VOCABULARY_SUFFIX


def written_paths(output_files):
    """Every file a run writes besides its records: manifests and vocabulary copies (checked,
    as the records are, before any work)."""
    return [path for manifest_file in manifest_paths(output_files)
            for path in (manifest_file, vocabulary_copy(manifest_file))]


def cut_name(options):
    """How instances were cut: the original's sentence rule, or full windows (of each
    document, or of the documents' stream)."""
    if not options.full_windows:
        return "sentences"
    return "full_windows_across_documents" if options.cross_documents else "full_windows"


def build(options, vocab_file, do_lower_case, recipe, random_seed, gzip, summary):
    """The settings and counts of a run of create_pretraining_data (`options`: its
    InstanceOptions; `summary`: its Summary), which every manifest of the run holds."""
    tokens = vocab_lines(vocab_file)
    return {
        "format": FORMAT,
        "tool": f"bert_tf {__version__} create_pretraining_data",
        "recipe": recipe,
        "objective": options.objective,
        "masking": options.masking,
        "masked_lm_prob": options.masked_lm_prob,
        "max_predictions_per_seq": options.max_predictions_per_seq,
        "do_whole_word_mask": options.do_whole_word_mask,
        "cut": cut_name(options),
        "short_seq_prob": None if options.full_windows else options.short_seq_prob,
        "max_seq_length": options.max_seq_length,
        "pack_sequences": options.pack_sequences,
        "max_sequences_per_row": options.sequences_per_row if options.pack_sequences else 0,
        "dupe_factor": options.dupe_factor,
        "random_seed": random_seed,
        "gzip": gzip,
        "vocabulary_sha256": tokens_sha256(tokens),
        "vocab_size": len(tokens),
        "mask_id": tokens.index(b"[MASK]") if b"[MASK]" in tokens else None,
        "do_lower_case": bool(do_lower_case),
        "documents": summary.documents,
        "input_tokens": summary.input_tokens,
        "input_tokens_in_records": summary.input_tokens_in_records,
    }


def write(settings, output_files, vocab_file, records_per_file):
    """Writes, in each folder of `output_files`, the vocabulary's copy and then the manifest:
    `settings` (`build`), the copy's name and the folder's files with their records
    (`records_per_file`) and sizes, which `read_records` checks; each atomically, once the
    records are in place (a manifest names only complete files). Returns the manifests' paths."""
    written = []
    for manifest_file, files in manifest_paths(output_files).items():
        copy = vocabulary_copy(manifest_file)
        with io_utils.atomic_output(copy) as tmp:
            if io_utils.is_url(tmp):
                import tensorflow as tf
                tf.io.gfile.copy(vocab_file, tmp, overwrite=True)
            else:
                shutil.copyfile(vocab_file, tmp)
        manifest = dict(settings, vocabulary=os.path.basename(copy), files={
            os.path.basename(path): {"records": records_per_file[path], "bytes": _size(path)}
            for path in files})
        with io_utils.atomic_open(manifest_file) as f:
            f.write(json.dumps(manifest, indent=2) + "\n")
        written.append(manifest_file)
    return written


def _size(path):
    if io_utils.is_url(path):
        import tensorflow as tf
        return tf.io.gfile.stat(path).length
    return os.path.getsize(path)


def _listdir(folder):
    if io_utils.is_url(folder):
        import tensorflow as tf
        return tf.io.gfile.listdir(folder)
    return os.listdir(folder or ".")


def read(path):
    """A manifest's object; None when the file is not one of ours (not JSON, another format:
    a user's own file of the same suffix). One of ours that lacks a setting is an InputError
    naming it."""
    text = io_utils.read_text(path, "records manifest")
    try:
        manifest = json.loads(text)
    except json.JSONDecodeError:
        return None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        return None
    missing = [key for key in SETTINGS + ("files", "vocabulary") if key not in manifest]
    if missing:
        raise file_error(path, f"the manifest has no {', '.join(missing)}")
    return manifest


@dataclasses.dataclass
class RecordFiles:
    """A run's record files and what their manifests say: `manifest` the settings (None: the
    records have none, as the original's), `manifest_file` the first manifest's path,
    `vocab_file` the vocabulary copy beside it."""
    paths: list
    manifest: dict = None
    manifest_file: str = None
    vocab_file: str = None


def _manifests_in(folders):
    """{record path: (manifest path, manifest)} of the manifests in `folders`, and the paths of
    those manifests and their vocabulary copies. A record file two manifests name is an
    InputError naming both."""
    named, companions = {}, set()
    for folder in folders:
        for name in sorted(_listdir(folder)):
            if not name.endswith(SUFFIX) or io_utils.is_temporary_name(name):
                continue
            path = os.path.join(folder, name)
            manifest = read(path)
            if manifest is None:
                continue
            companions.add(os.path.normpath(path))
            companions.add(os.path.normpath(os.path.join(folder, manifest["vocabulary"])))
            for record_name in manifest["files"]:
                record = os.path.normpath(os.path.join(folder, record_name))
                if record in named:
                    raise file_error(record, f"is named by two manifests, {named[record][0]} "
                                             f"and {path}: remove the one of the run that did "
                                             f"not write it last")
                named[record] = (path, manifest)
    return named, companions


def read_records(input_files):
    """The record files among `input_files` (manifests and their vocabulary copies, which a
    folder's glob also matches, left out) and their manifest.

    Each record file is named by a manifest in its folder, or none is; its size must be the
    one its manifest recorded. The manifests of one run must agree on SETTINGS. Otherwise an
    InputError naming both sides."""
    named, companions = _manifests_in(dict.fromkeys(os.path.dirname(p) for p in input_files))
    paths = [p for p in input_files if os.path.normpath(p) not in companions]
    found = []
    for path in paths:
        entry = named.get(os.path.normpath(path))
        if entry is not None:
            manifest_file, manifest = entry
            recorded = manifest["files"][os.path.basename(path)].get("bytes")
            size = _size(path)
            if recorded is not None and size != recorded:
                raise file_error(path, f"is {size} bytes, but {manifest_file} made it "
                                       f"{recorded}: the records were changed or replaced "
                                       f"after it was written; make them again")
        found.append((path, entry))
    with_manifest = [(p, e) for p, e in found if e is not None]
    if not with_manifest:
        return RecordFiles(paths)
    without = [p for p, e in found if e is None]
    first_path, (first_file, first) = with_manifest[0]
    if without:
        raise file_error(without[0], f"has no manifest, while {first_path} has {first_file}: "
                                     f"records made by other runs in one run")
    for path, (manifest_file, manifest) in with_manifest[1:]:
        differ = [key for key in SETTINGS if manifest[key] != first[key]]
        if differ:
            key = differ[0]
            raise file_error(manifest_file, f"says {key} {manifest[key]!r} for {path}, "
                                            f"{first_file} {first[key]!r} for {first_path}: "
                                            f"records made two ways in one run")
    return RecordFiles(paths, first, first_file,
                       os.path.join(os.path.dirname(first_file), first["vocabulary"]))


# run_pretraining's arguments that the records' manifest settles: argument -> manifest key.
TRAINING_ARGUMENTS = {"max_seq_length": "max_seq_length",
                      "max_predictions_per_seq": "max_predictions_per_seq",
                      "objective": "objective", "masked_lm_prob": "masked_lm_prob",
                      "do_lower_case": "do_lower_case"}


def training_values(records, given):
    """What a pretraining run takes from its records' manifest (`records`: a RecordFiles with
    one): {argument: value} for the arguments of TRAINING_ARGUMENTS and vocab_file. `given`:
    {argument: value} of the arguments the user gave; one that contradicts the manifest is an
    InputError naming both. Masked-LM alone (objective "mlm") may train on sentence-pair
    records; records with static masks hold their masks, so masked_lm_prob is not taken (the
    task refuses a given one)."""
    manifest, where = records.manifest, records.manifest_file
    values = {}
    for argument, key in TRAINING_ARGUMENTS.items():
        recorded = manifest[key]
        if argument == "masked_lm_prob" and manifest["masking"] == "static":
            continue
        if argument == "objective" and given.get(argument) == "mlm":
            continue
        if argument in given and given[argument] != recorded:
            raise argument_error(argument, f"{format_value(given[argument])} contradicts the "
                                           f"records: {where} says {key} "
                                           f"{format_value(recorded)}; leave {arg(argument)} "
                                           f"out to use it, or make the records again")
        values[argument] = recorded
    if not io_utils.is_url(records.vocab_file) and not os.path.exists(records.vocab_file):
        raise file_error(where, f"names the vocabulary {manifest['vocabulary']}, which is not "
                                f"beside it: copy the records' folder whole")
    if "vocab_file" in given and (vocabulary_sha256(given["vocab_file"])
                                  != manifest["vocabulary_sha256"]):
        raise argument_error("vocab_file", f"{given['vocab_file']} is not the vocabulary the "
                                           f"records were made with ({where}: "
                                           f"{manifest['vocabulary']}); leave "
                                           f"{arg('vocab_file')} out to use it")
    values["vocab_file"] = given.get("vocab_file", records.vocab_file)
    return values


def format_value(value):
    """A value as a flag takes it (true/false for booleans)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def record_layout(manifest):
    """The PretrainingLayout of the records a manifest describes."""
    return PretrainingLayout.of(manifest["masking"], manifest["objective"] == "mlm_nsp",
                                manifest["pack_sequences"], manifest["max_sequences_per_row"])


def check_layout(records, found, path):
    """The layout read from the first record of `path` (`found`) must be the manifest's:
    otherwise an InputError naming both."""
    expected = record_layout(records.manifest)
    if found != expected:
        raise file_error(path, f"its records hold {found.describe()}, but "
                               f"{records.manifest_file} says {expected.describe()}: the "
                               f"records were replaced after it was written; make them again")
