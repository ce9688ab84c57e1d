"""Checkpoint formats: reading the original's TF1 names, our TF2 checkpoints and Hugging Face
directories into a model, and writing TF1 checkpoints in the original naming.

`load_checkpoint(model, path)` (the semantics of every `--init_checkpoint` flag) accepts
- a TF1 checkpoint in the original naming (bert/embeddings/..., bert/encoder/layer_N/...,
  bert/pooler/..., cls/predictions/..., cls/seq_relationship/..., run_classifier's
  output_weights/output_bias, run_squad's cls/squad/...), with or without Adam slots
  (`*/adam_m`, `*/adam_v`) and `global_step`, which are skipped;
- our own TF2 object checkpoint (tf.train.Checkpoint holding the model under any name, e.g.
  `tf.train.Checkpoint(model=pretrainer, optimizer=...)`, as run_pretraining writes); the encoder
  of one task model loads into another;
- a Hugging Face BERT directory (config.json + model.safetensors), read with safetensors' numpy
  API (no torch, no pickle);
- a keras-hub BERT preset directory (config.json of a BertBackbone + model.weights.h5, and a
  BertTextClassifier's or BertMaskedLM's task.weights.h5: bert_tf.model.keras_hub_preset);
- a directory holding a `checkpoint` state file (its latest checkpoint is used).
It returns a LoadReport (bert_tf.model.load_report): which of the model's variables were
loaded and which are new (e.g. a fresh task head), and which checkpoint variables were unused.
A shape mismatch raises InputError naming the variable, and so does a config that describes
another number of encoder layers than the checkpoint holds with every shape the same
(`load_report.check_config_describes`).

`write_tf1_checkpoint(model, path)` writes the model's weights in the original naming (the fused
query/key/value projection split back into query, key and value) so that the original release
and tools built on it restore them; `write_named_checkpoint` writes {original name: array}, and
`original_named_weights` reads any of these formats as such.

Names come from `bert_tf.model.variable_names.original_variable_map`. Checkpoints are read here
through `open_checkpoint`: a damaged file (an `.index` that is not an sstable, a truncated or
corrupted `.data-*`, a missing data file) raises InputError naming that file, not TF's OpError
(`damaged_checkpoint_error`).
"""
import collections
import contextlib
import json
import os

import numpy as np
import tensorflow as tf
from safetensors import safe_open
from tensorflow.core.protobuf import trackable_object_graph_pb2

from bert_tf.errors import InputError, file_error
from bert_tf.io_utils import atomic_open, temporary_path
from bert_tf.model import keras_hub_preset
from bert_tf.model.config import BertConfig
from bert_tf.model.load_report import (LoadReport, check_config_describes, encoder_layers,
                                       layer_count_error, unused_layer_variables)
from bert_tf.model.models import BertPretrainer
from bert_tf.model.variable_names import HF_IGNORED, hf_to_original_name, original_variable_map

OPTIMIZER_SLOT_SUFFIXES = ("/adam_m", "/adam_v", "/Adam", "/Adam_1", "/Momentum")
SKIPPED_NAMES = ("global_step", "save_counter/.ATTRIBUTES/VARIABLE_VALUE",
                 "_CHECKPOINTABLE_OBJECT_GRAPH")
HF_WEIGHT_FILES = ("model.safetensors",)


_READ_ERRORS = (tf.errors.OpError, IndexError)  # IndexError: "Read less bytes than requested"


def damaged_checkpoint_error(prefix, error):
    """The InputError for `error`, raised reading the TF checkpoint `prefix`: names its index
    file if that cannot be read, else its data file(s)."""
    prefix = os.fspath(prefix)
    reason = " ".join(str(getattr(error, "message", None) or error).split())
    if len(reason) > 200:
        reason = reason[:197] + "..."
    try:
        tf.train.load_checkpoint(prefix)
    except _READ_ERRORS:
        return file_error(prefix + ".index", f"damaged checkpoint index file: cannot be read "
                                             f"({reason})")
    data = sorted(tf.io.gfile.glob(prefix + ".data-*"))
    if not data:
        return file_error(prefix + ".data-00000-of-00001", "checkpoint data file not found (the "
                                                           "index file is there)")
    where = data[0] if len(data) == 1 else f"{prefix}.data-* ({len(data)} files)"
    return file_error(where, f"damaged checkpoint data file: cannot be read ({reason})")


@contextlib.contextmanager
def naming_damaged_checkpoint(prefix):
    """Turns a read error inside the block (restoring checkpoint `prefix`) into
    `damaged_checkpoint_error`."""
    try:
        yield
    except _READ_ERRORS as e:
        raise damaged_checkpoint_error(prefix, e) from None


class _CheckedReader:
    """A checkpoint reader whose failing reads raise `damaged_checkpoint_error`."""

    def __init__(self, reader, prefix):
        self.reader = reader
        self.prefix = prefix

    def get_variable_to_shape_map(self):
        return self.reader.get_variable_to_shape_map()

    def get_variable_to_dtype_map(self):
        return self.reader.get_variable_to_dtype_map()

    def has_tensor(self, name):
        return self.reader.has_tensor(name)

    def get_tensor(self, name):
        try:
            return self.reader.get_tensor(name)
        except _READ_ERRORS as e:
            raise damaged_checkpoint_error(self.prefix, e) from None


def open_checkpoint(prefix):
    """tf.train.load_checkpoint(prefix), but a damaged index or data file is an InputError
    naming it (when opening, or when `get_tensor` reads the data)."""
    prefix = os.fspath(prefix)
    try:
        reader = tf.train.load_checkpoint(prefix)
    except _READ_ERRORS as e:
        raise damaged_checkpoint_error(prefix, e) from None
    return _CheckedReader(reader, prefix)


def load_checkpoint(model, path):
    """Loads weights into `model` (BertEncoder or a task model) from `path`; returns LoadReport.

    See the module docstring for the accepted formats. Raises InputError when the path holds no
    checkpoint, a file of it is damaged, a variable's shape differs, or the model's config does
    not describe the checkpoint's encoder.
    """
    kind, location = resolve_checkpoint(path)
    if kind == "hf":
        report = _load_named(model, _HFValues(location), location, "hugging face")
    elif kind == "keras_hub":
        report = _load_named(model, keras_hub_preset.PresetValues(location), location,
                             "keras-hub")
    else:
        reader = open_checkpoint(location)
        if "_CHECKPOINTABLE_OBJECT_GRAPH" in reader.get_variable_to_shape_map():
            report = _load_object_checkpoint(model, reader, location)
        else:
            report = _load_named(model, ReaderValues(reader), location, "tf1")
    if not getattr(model, "reads_pooled_output", True):
        report.unread = [name for name in report.new if name.startswith("bert/pooler/")]
    check_config_describes(report, lambda: _config_beside(kind, location))
    return report


def _config_beside(kind, location):
    """(path, BertConfig) of the config in a checkpoint's own folder (the one a model
    directory is read with), or None (none, or not readable)."""
    if kind == "keras_hub":
        path, read = os.path.join(location, "config.json"), keras_hub_preset.preset_config
        source = location
    else:
        path = (os.path.join(os.path.dirname(location), "bert_config.json") if kind == "tf"
                else os.path.join(location, "config.json"))
        read, source = BertConfig.from_json_file, path
    try:
        return (path, read(source)) if tf.io.gfile.exists(path) else None
    except InputError:
        return None


def checkpoint_step(report):
    """The training step a loaded checkpoint (its LoadReport) was saved at: the original's
    global_step, or our optimizer's iterations; 0 for weights without one (a Hugging Face
    directory, a keras-hub preset, an exported checkpoint)."""
    if report.format not in ("tf1", "tf2"):
        return 0
    reader = open_checkpoint(report.path)
    names = [name for name in reader.get_variable_to_shape_map()
             if name == "global_step" or name.startswith("optimizer/")
             and name.endswith("/_iterations/.ATTRIBUTES/VARIABLE_VALUE")]
    return int(reader.get_tensor(min(names, key=len))) if names else 0


# A fine-tuning run's best checkpoint (bert_tf.training.best_checkpoint): output_dir/<BEST_DIR>/
# holds it and the record that names it.
BEST_DIR = "best"
BEST_RECORD_FILE = "best_checkpoint.json"


def kept_best_checkpoint(output_dir):
    """(prefix, step) of the best weights a run kept in output_dir/best (what eval and predict
    use then), or None."""
    directory = os.path.join(output_dir, BEST_DIR)
    path = os.path.join(directory, BEST_RECORD_FILE)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        record = json.load(f)
    name = record.get("checkpoint")
    prefix = name and os.path.join(directory, name)
    if not prefix or not os.path.exists(prefix + ".index"):
        return None
    return prefix, record["selection"]["best_step"]


def resolve_checkpoint(path):
    """("hf", directory), ("keras_hub", directory) or ("tf", checkpoint prefix) for a user-given
    path; InputError if none."""
    path = os.fspath(path)
    if keras_hub_preset.is_preset(path):
        return "keras_hub", path
    if tf.io.gfile.isdir(path):
        if tf.io.gfile.exists(os.path.join(path, "config.json")) and any(
                tf.io.gfile.exists(os.path.join(path, f)) for f in HF_WEIGHT_FILES):
            return "hf", path
        if tf.io.gfile.exists(os.path.join(path, "pytorch_model.bin")):
            raise file_error(path, "holds pytorch_model.bin only; convert it to model.safetensors "
                                   "(pickle files are not read)")
        # A training run's output_dir that kept its best checkpoint: that one, as the run's
        # own eval, predict and export (bert_tf.training.best_checkpoint).
        best = kept_best_checkpoint(path)
        if best is not None:
            return "tf", best[0]
        latest = tf.train.latest_checkpoint(path)
        if latest is None:
            # Google's released model folders hold bert_model.ckpt.* but no state file.
            indexes = tf.io.gfile.glob(os.path.join(path, "*.index"))
            if len(indexes) == 1:
                return "tf", indexes[0][:-len(".index")]
            raise file_error(path, "directory holds neither a checkpoint (no 'checkpoint' state "
                                   "file) nor a Hugging Face model (config.json + "
                                   "model.safetensors) nor a keras-hub preset (config.json + "
                                   "model.weights.h5)")
        return "tf", latest
    if not tf.io.gfile.exists(path + ".index"):
        raise file_error(path, "no checkpoint found (expected PATH.index, or a directory)")
    return "tf", path


def hf_directory_files(path):
    """For a Hugging Face directory: (BertConfig, vocab.txt path or None, do_lower_case or None).

    Command lines use these unless flags say otherwise; returns None for other checkpoints.
    """
    kind, location = resolve_checkpoint(path)
    if kind != "hf":
        return None
    config = BertConfig.from_json_file(os.path.join(location, "config.json"), hugging_face=True)
    vocab = os.path.join(location, "vocab.txt")
    do_lower_case = None
    tokenizer_config = os.path.join(location, "tokenizer_config.json")
    if tf.io.gfile.exists(tokenizer_config):
        with tf.io.gfile.GFile(tokenizer_config) as f:
            do_lower_case = json.load(f).get("do_lower_case")
    return config, (vocab if tf.io.gfile.exists(vocab) else None), do_lower_case


def _is_skipped(name):
    return name in SKIPPED_NAMES or name.endswith(OPTIMIZER_SLOT_SUFFIXES)


class ReaderValues:
    """A name -> numpy mapping over a checkpoint reader (reads lazily)."""

    def __init__(self, reader):
        self.reader = reader
        self.shapes = reader.get_variable_to_shape_map()

    def __contains__(self, name):
        return name in self.shapes

    def __iter__(self):
        return iter(self.shapes)

    def shape(self, name):
        return tuple(self.shapes[name])

    def __getitem__(self, name):
        return self.reader.get_tensor(name)


def _part_shape(part):
    shape = tuple(part.variable.shape)
    if part.index is None:
        return shape
    return shape[:-1] + (shape[-1] // part.count,)


def assign_parts(parts, values, path):
    """Assigns each variable of `parts` from a name -> array mapping in the original naming.

    A variable stored as several original parts (the fused QKV) gets their concatenation.
    Every name and shape is checked before any variable is assigned; then the variables are
    read and assigned one at a time, so that a lazy mapping (a checkpoint reader, a
    safetensors file) never holds more than one variable's value beside the model's weights.
    Returns (loaded names, new names: not in `values`, used names).
    """
    by_variable = collections.OrderedDict()
    for part in parts:
        by_variable.setdefault(id(part.variable), []).append(part)
    loaded, new, used = [], [], set()
    to_assign = []
    for variable_parts in by_variable.values():
        present = [p for p in variable_parts if p.name in values]
        if not present:
            new.extend(p.name for p in variable_parts)
            continue
        if len(present) != len(variable_parts):
            missing = [p.name for p in variable_parts if p.name not in values]
            raise file_error(path, f"checkpoint has {present[0].name} but not {missing[0]}")
        for p in variable_parts:
            if values.shape(p.name) != _part_shape(p):
                raise file_error(path, f"variable {p.name} has shape {list(values.shape(p.name))} "
                                       f"in the checkpoint but {list(_part_shape(p))} in the model")
        to_assign.append(variable_parts)
        loaded.extend(p.name for p in variable_parts)
        used.update(p.name for p in variable_parts)
    for variable_parts in to_assign:
        arrays = [np.asarray(values[p.name]) for p in variable_parts]
        value = arrays[0] if len(arrays) == 1 else np.concatenate(arrays, axis=-1)
        del arrays
        variable = variable_parts[0].variable
        variable.assign(value.astype(variable.dtype, copy=False))
    return loaded, new, used


def _load_named(model, values, path, fmt):
    """Loads weights from a name -> array mapping in the original naming."""
    loaded, new, used = assign_parts(original_variable_map(model), values, path)
    skipped = [n for n in values if _is_skipped(n)]
    unused = sorted(n for n in values if n not in used and not _is_skipped(n))
    return LoadReport(path, fmt, loaded, new, unused, len(skipped),
                      unused_layers=unused_layer_variables(unused, loaded + new))


def is_original_checkpoint(path):
    """True for a TF1 name-based checkpoint (the original's), False for our TF2 object ones."""
    shapes = open_checkpoint(path).get_variable_to_shape_map()
    return "_CHECKPOINTABLE_OBJECT_GRAPH" not in shapes


def _object_paths(root):
    """Variable id -> attribute path below `root` ("encoder/layer_0/attention/qkv_kernel")."""
    view = tf.train.TrackableView(root)
    paths = {}
    seen = {id(root)}
    queue = collections.deque([(root, "")])
    while queue:
        obj, prefix = queue.popleft()
        for name, child in view.children(obj).items():
            if id(child) in seen:
                continue
            seen.add(id(child))
            paths[id(child)] = prefix + name
            queue.append((child, prefix + name + "/"))
    return paths


def _checkpoint_paths(reader):
    """Every attribute path in a TF2 checkpoint's object graph -> its variable's key.

    A variable can be reachable along several paths (e.g. model/encoder/... and, through a Keras
    optimizer, optimizer/_trainable_variables/N), and the checkpoint key names only the shortest
    one, so matching by key alone would miss it; the object graph has them all.
    """
    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(reader.get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))
    paths = {}
    expanded = set()
    queue = collections.deque([(0, "")])
    while queue:
        node_id, prefix = queue.popleft()
        node = graph.nodes[node_id]
        for attribute in node.attributes:
            if attribute.name == "VARIABLE_VALUE":
                paths[prefix.rstrip("/")] = attribute.checkpoint_key
        if node_id in expanded:
            continue
        expanded.add(node_id)
        for child in node.children:
            queue.append((child.node_id, prefix + child.local_name + "/"))
    return paths


def _load_object_checkpoint(model, reader, path):
    """Loads our TF2 checkpoint: matches our variables' attribute paths under any root name.

    The model may sit under any attribute (model=, encoder=...), and a checkpoint of one task
    model feeds another through the shared encoder paths.
    """
    shapes = reader.get_variable_to_shape_map()
    checkpoint_paths = _checkpoint_paths(reader)
    parts = original_variable_map(model)
    candidates = []
    for root in (model, getattr(model, "encoder", None)):
        if root is None:
            continue
        paths = _object_paths(root)
        ours = {id(p.variable): paths[id(p.variable)] for p in parts if id(p.variable) in paths}
        prefixes = collections.Counter()
        for checkpoint_path in checkpoint_paths:
            for rel in ours.values():
                if checkpoint_path == rel or checkpoint_path.endswith("/" + rel):
                    prefixes[checkpoint_path[:len(checkpoint_path) - len(rel)]] += 1
        if prefixes:
            prefix, count = prefixes.most_common(1)[0]
            candidates.append((count, prefix, ours))
    if not candidates:
        raise file_error(path, "TF2 checkpoint holds no variable of this model")
    _, prefix, ours = max(candidates, key=lambda c: c[0])
    names = {}
    for p in parts:
        names.setdefault(id(p.variable), []).append(p.name)
    loaded, new, used = [], [], set()
    for p in parts:
        if p.index not in (None, 0):
            continue
        variable, label = p.variable, names[id(p.variable)]
        key = checkpoint_paths.get(prefix + ours.get(id(variable), "\0"))
        if key is None:
            new.extend(label)
            continue
        if tuple(shapes[key]) != tuple(variable.shape):
            raise file_error(path, f"variable {label[0]} ({key}) has shape {list(shapes[key])} in "
                                   f"the checkpoint but {list(variable.shape)} in the model")
        variable.assign(reader.get_tensor(key))
        loaded.extend(label)
        used.add(key)
    unused = sorted(cp for cp, key in checkpoint_paths.items()
                    if cp.startswith(prefix) and key not in used and not _is_skipped(key)
                    and not cp.startswith("optimizer/"))
    skipped = len(shapes) - len(used) - len(unused)
    below_prefix = {cp[len(prefix):]: cp for cp in unused}
    return LoadReport(path, "tf2", loaded, new, unused, skipped,
                      unused_layers=[below_prefix[rel] for rel in unused_layer_variables(
                          list(below_prefix), list(ours.values()))])


class _HFValues:
    """A name -> numpy mapping in the original naming over a Hugging Face directory's
    model.safetensors, read lazily: one tensor at a time, each through its own short-lived
    mapping of the file, so that loading holds no second copy of the model (neither arrays nor
    the file's pages, which would count in the process's resident set). Parameters without an
    original name keep their Hugging Face name (reported as unused); buffers and tied copies
    (HF_IGNORED) are left out."""

    def __init__(self, directory):
        self.path = os.path.join(directory, "model.safetensors")
        self.sources = {}  # name -> (Hugging Face name, transpose?, shape in the original)
        with self._open() as f:
            for hf_name in f.keys():
                mapped = hf_to_original_name(hf_name)
                if mapped is None and HF_IGNORED.search(hf_name):
                    continue
                name, transpose = mapped or (hf_name, False)
                shape = tuple(f.get_slice(hf_name).get_shape())
                self.sources[name] = (hf_name, transpose, shape[::-1] if transpose else shape)

    @contextlib.contextmanager
    def _open(self):
        try:
            with safe_open(self.path, framework="numpy") as f:
                yield f
        except Exception as e:  # safetensors raises its own error types on a corrupt file
            raise file_error(self.path, f"cannot read safetensors file: {e}") from None

    def __contains__(self, name):
        return name in self.sources

    def __iter__(self):
        return iter(self.sources)

    def shape(self, name):
        return self.sources[name][2]

    def __getitem__(self, name):
        hf_name, transpose, _ = self.sources[name]
        with self._open() as f:
            array = f.get_tensor(hf_name)
        return np.ascontiguousarray(array.T) if transpose else array


def _read_hf_weights(directory):
    """A Hugging Face directory's weights renamed to the original naming (numpy, no torch):
    {name: array} of `_HFValues`, all read."""
    values = _HFValues(directory)
    return {name: values[name] for name in values}


def original_weights(model):
    """{original name: numpy array} of the model's weights (QKV split), for writing/exporting."""
    out = collections.OrderedDict()
    for part in original_variable_map(model):
        value = np.asarray(part.variable.numpy() if hasattr(part.variable, "numpy")
                           else part.variable.value)
        if part.index is not None:
            value = np.split(value, part.count, axis=-1)[part.index]
        out[part.name] = value
    return out


def write_tf1_checkpoint(model, path, global_step=None):
    """Writes the model's weights as a TF1 checkpoint in the original naming at prefix `path`.

    Also writes the `checkpoint` state file in its directory, so the directory works as an
    --init_checkpoint for the original release (tf.train.latest_checkpoint). The files appear
    only when complete (written under a temporary prefix, then renamed).
    """
    return write_named_checkpoint(original_weights(model), path, global_step)


def write_named_checkpoint(weights, path, global_step=None):
    """`write_tf1_checkpoint` of {original name: numpy array} (any variables, as they are)."""
    path = os.fspath(path)
    weights = collections.OrderedDict(weights)
    if global_step is not None:
        weights["global_step"] = np.asarray(global_step, np.int64)
    directory = os.path.dirname(path) or "."
    tf.io.gfile.makedirs(directory)
    tmp = temporary_path(path)
    names = list(weights)
    tf.raw_ops.SaveV2(prefix=tmp, tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=[tf.constant(weights[n]) for n in names])
    for suffix in (".index", ".data-00000-of-00001"):
        tf.io.gfile.rename(tmp + suffix, path + suffix, overwrite=True)
    # The `checkpoint` state file as tf.train.latest_checkpoint reads it (what the deprecated
    # update_checkpoint_state writes, without its deprecation warning), naming the checkpoint
    # relative to its folder so that the folder can be moved (an absolute save_dir keeps the
    # name as given).
    name = os.path.basename(path)
    state = tf.compat.v1.train.generate_checkpoint_state_proto(os.path.abspath(directory), name,
                                                               [name])
    with atomic_open(os.path.join(directory, "checkpoint")) as f:
        f.write(str(state))  # a protocol buffer prints as its text format
    return path


def original_named_weights(path, bert_config):
    """{original name: numpy array} of every weight of the checkpoint `path` (any format
    `load_checkpoint` takes), and the names of what was left out: optimizer slots and step
    counters always; of our TF2 checkpoints, whatever a BertPretrainer of `bert_config` (the
    encoder and the pretraining heads) does not hold, such as a task's head. A checkpoint of
    another number of encoder layers than `bert_config`'s is an InputError naming it
    (`check_config_describes`)."""
    kind, location = resolve_checkpoint(path)
    if kind == "hf":
        values = _read_hf_weights(location)
        # Parameters without an original name keep their Hugging Face name (with dots).
        named = ({n: v for n, v in values.items() if "." not in n},
                 sorted(n for n in values if "." in n))
    elif kind == "keras_hub":
        values = keras_hub_preset.PresetValues(location)
        # Datasets without an original name keep their file and HDF5 path ("file:path").
        named = ({n: values[n] for n in values if ":" not in n},
                 sorted(n for n in values if ":" in n))
    else:
        reader = open_checkpoint(location)
        named = None
        if "_CHECKPOINTABLE_OBJECT_GRAPH" not in reader.get_variable_to_shape_map():
            values = ReaderValues(reader)
            named = ({n: values[n] for n in values if not _is_skipped(n)},
                     sorted(n for n in values if _is_skipped(n)))
    if named is not None:
        held = len(encoder_layers(n for n in named[0] if n.startswith("bert/encoder/")))
        if held != bert_config.num_hidden_layers:
            raise layer_count_error(path, held, bert_config.num_hidden_layers)
        return named
    model = BertPretrainer(bert_config)
    report = _load_object_checkpoint(model, reader, location)
    check_config_describes(report)
    weights = original_weights(model)
    return {n: weights[n] for n in report.loaded}, report.unused
