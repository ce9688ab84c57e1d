"""The folders an export writes, and which of them a new export may replace.

Every export records what it wrote in a marker (`write_marker`), so that a later export replaces
a folder only when it holds nothing else, at any depth (`unexpected_entries`), and a user's file
put into an export (assets/notes.txt, a file beside model.tflite) is never deleted with it. The
layouts: a SavedModel (its marker in assets/),
TF Hub's two SavedModels (export_dir/preprocessor and export_dir/encoder), LiteRT (the marker
beside model.tflite). `check_export_dir` is every format's check before any work.
"""
import json
import os

import tensorflow as tf

from bert_tf.io_utils import check_replaceable_dir

# Written last into every export (a SavedModel's in its assets/): what was exported, and
# `contents`, every file and folder the export wrote.
EXPORT_MARKER = "bert_tf_export.json"


def write_marker(root, description, marker_folder="assets"):
    """Writes root/marker_folder/EXPORT_MARKER: `description` and `contents`, the sorted
    "/"-separated relative paths of every file and folder under `root` (the marker included).
    Call it when the export's every other file is written."""
    tf.io.gfile.makedirs(os.path.join(root, marker_folder))
    marker = f"{marker_folder}/{EXPORT_MARKER}" if marker_folder else EXPORT_MARKER
    contents = sorted(set(_entries(root)) | {marker})
    with tf.io.gfile.GFile(os.path.join(root, marker), "w") as f:
        f.write(json.dumps(dict(description, contents=contents), indent=2, sort_keys=True)
                + "\n")


def _entries(root, folder=""):
    """Every file and folder under root/folder as a relative path ("x/" for a folder), not
    following symbolic links (one is an entry, whatever it points to)."""
    for name in sorted(tf.io.gfile.listdir(os.path.join(root, folder) if folder else root)):
        name = name.rstrip("/")
        relative = f"{folder}/{name}" if folder else name
        path = os.path.join(root, relative)
        if tf.io.gfile.isdir(path) and not os.path.islink(path):
            yield relative + "/"
            yield from _entries(root, relative)
        else:
            yield relative


def unexpected_entries(path, marker_folder="assets"):
    """What folder `path` holds, at any depth, beyond what the export recorded in its marker
    (path/marker_folder/EXPORT_MARKER) wrote: a sorted list of relative paths ("assets/notes.txt",
    "extra/" for a whole folder), [] for an export exactly as written; None when there is no
    such marker (no export of ours, or a marker without `contents`). The one check of every
    format (SavedModel, TF Hub's two, LiteRT) before a new export replaces a folder."""
    marker = os.path.join(path, marker_folder, EXPORT_MARKER)
    try:
        with tf.io.gfile.GFile(marker) as f:
            contents = json.load(f)["contents"]
    except (tf.errors.OpError, OSError, ValueError, KeyError, TypeError):
        return None
    if not (isinstance(contents, list) and all(isinstance(entry, str) for entry in contents)):
        return None
    written, unexpected = set(contents), []
    for entry in _entries(path):
        inside_unexpected = any(entry.startswith(u) for u in unexpected if u.endswith("/"))
        if entry not in written and not inside_unexpected:
            unexpected.append(entry)
    return unexpected


# The two SavedModels of a TF Hub export, each a folder of export_dir.
TFHUB_PARTS = ("preprocessor", "encoder")


def tfhub_unexpected_entries(path):
    """What folder `path` holds beyond the two SavedModels of a TF Hub export, at any depth
    (relative paths; [] for the export as written), or None when it is no TF Hub export of ours
    (`unexpected_entries` of each part)."""
    names = {name.rstrip("/") for name in tf.io.gfile.listdir(path)}
    parts = {part: unexpected_entries(os.path.join(path, part)) for part in TFHUB_PARTS}
    if None in parts.values():
        return None
    unexpected = [name + ("/" if tf.io.gfile.isdir(os.path.join(path, name)) else "")
                  for name in sorted(names - set(parts))]
    for part, entries in parts.items():
        unexpected += [f"{part}/{entry}" for entry in entries]
    return sorted(unexpected)


def litert_unexpected_entries(path):
    """What folder `path` holds beyond what a LiteRT export wrote, at any depth (relative paths;
    [] for the export as written), or None when it is no LiteRT export of ours
    (`unexpected_entries` of its marker beside model.tflite)."""
    return unexpected_entries(path, marker_folder="")


def any_export_unexpected_entries(path):
    """What folder `path` holds beyond what an export of any format wrote there, at any depth
    ([] for an export as written), or None when it is no export of ours."""
    for format_entries in (unexpected_entries, tfhub_unexpected_entries,
                           litert_unexpected_entries):
        unexpected = format_entries(path)
        if unexpected is not None:
            return unexpected
    return None


def is_bert_tf_export(path):
    """Whether folder `path` is a SavedModel export of ours, holding nothing else."""
    return unexpected_entries(path) == []


def is_litert_export(path):
    """Whether folder `path` is a LiteRT export of ours, holding nothing else."""
    return litert_unexpected_entries(path) == []


def check_export_dir(export_dir, keep=None, name="export_dir"):
    """Before any work: `export_dir` is new, empty, or an earlier export of ours of any format
    holding nothing but what it wrote, at any depth, which the export then replaces. Anything
    else, or a folder that is or holds one of `keep` ({argument name: path}: the run's output
    and checkpoint folders), raises an InputError naming `name` (and the first file the export
    did not write)."""
    check_replaceable_dir(export_dir, name, any_export_unexpected_entries,
                          "an export of bert_tf", keep=keep)
