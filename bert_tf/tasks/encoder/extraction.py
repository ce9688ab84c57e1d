"""extract_features as a task: the original's reading of lines, packing and JSONL output (byte
for byte), or with `pooling` one embedding per line (JSONL or .npy); predictions stream to a
writer thread while the model runs the next batch. docs/model.md (extract_features).
"""
import collections
import dataclasses
import json
import queue
import re
import threading

import numpy as np
import tensorflow as tf

from bert_tf.data.input_pipeline import SORT_WINDOW_EXAMPLES, trim_to_longest
from bert_tf.io_utils import atomic_open, atomic_output, decode_utf8, is_url
from bert_tf.model.checkpoints import load_checkpoint
from bert_tf.model.load_report import require_complete
from bert_tf.model.pooling import check_pooling
from bert_tf.progress import Progress
from bert_tf.tasks.base import Records
from bert_tf.tasks.encoder.task import EncoderConfig, EncoderTask
from bert_tf.tasks.preprocessor import PreparedTask, converted
from bert_tf.text import packing

InputExample = collections.namedtuple("InputExample", ["unique_id", "text_a", "text_b"])
InputFeatures = collections.namedtuple(
    "InputFeatures", ["unique_id", "tokens", "input_ids", "input_mask", "input_type_ids"])


def read_examples(input_file):
    """Reads examples as the original: every line (an empty line is an empty text_a).

    Bytes that are not UTF-8 are an InputError naming the file and line (the original fails
    with a UnicodeDecodeError).
    """
    examples = []
    with tf.io.gfile.GFile(input_file, "rb") as reader:
        for unique_id, raw in enumerate(reader):
            line = decode_utf8(raw, input_file, unique_id + 1).strip()
            match = re.match(r"^(.*) \|\|\| (.*)$", line)
            if match is None:
                examples.append(InputExample(unique_id, line, None))
            else:
                examples.append(InputExample(unique_id, match.group(1), match.group(2)))
    return examples


def convert_examples_to_features(examples, seq_length, tokenizer):
    """The original's convert_examples_to_features: [CLS] a [SEP] (b [SEP]) truncated to
    `seq_length`, segment ids, mask and zero padding (`bert_tf.text.packing`), with each
    example's unique id and tokens. Yields the features, a chunk of examples tokenized and
    packed per call (`bert_tf.tasks.preprocessor.converted`)."""
    def convert(first, chunk):
        packed = packing.pack_texts(tokenizer, [e.text_a for e in chunk],
                                    [e.text_b for e in chunk], max_seq_length=seq_length)
        for i, example in enumerate(chunk):
            input_ids, input_mask = packed["input_ids"][i], packed["input_mask"][i]
            tokens = [str(t) for t in packing.packed_tokens(tokenizer, input_ids, input_mask)]
            yield InputFeatures(example.unique_id, tokens, input_ids.tolist(),
                                input_mask.tolist(), packed["segment_ids"][i].tolist())

    return converted(examples, convert)


def round6(values):
    """Python's round(float(x), 6) for float32 arrays, vectorised and bit-identical.

    A float32 has 24 significant bits and 1e6 needs 14 more (2**6 * 15625), so x * 1e6 is exact
    in float64; rint is then the correctly rounded (half-even) integer n, as round() computes,
    and n / 1e6 is the float64 nearest to n * 10**-6, which is what round() returns.
    """
    return np.rint(np.asarray(values, np.float32).astype(np.float64) * 1e6) / 1e6


def feature_json(feature, layer_indexes, layer_outputs):
    """One output line, exactly as the original formats it.

    feature: has `unique_id` and `tokens`; layer_outputs: list (one per layer index) of
    [seq_length, hidden] float32 arrays.
    """
    rows = [round6(output[:len(feature.tokens)]).tolist() for output in layer_outputs]
    all_features = []
    for i, token in enumerate(feature.tokens):
        all_layers = []
        for j, layer_index in enumerate(layer_indexes):
            layers = collections.OrderedDict()
            layers["index"] = layer_index
            layers["values"] = rows[j][i]
            all_layers.append(layers)
        features = collections.OrderedDict()
        features["token"] = token
        features["layers"] = all_layers
        all_features.append(features)
    output_json = collections.OrderedDict()
    output_json["linex_index"] = feature.unique_id
    output_json["features"] = all_features
    return json.dumps(output_json) + "\n"


def embedding_json(unique_id, embedding):
    """One line of the pooled output: {"linex_index": id, "embedding": [values rounded to 6
    places, as the original rounds its per-token values]}."""
    output_json = collections.OrderedDict()
    output_json["linex_index"] = unique_id
    output_json["embedding"] = round6(embedding).tolist()
    return json.dumps(output_json) + "\n"


_Example = collections.namedtuple("_Example", ["unique_id", "tokens"])  # what a line needs


@dataclasses.dataclass
class FeatureExtractionConfig(EncoderConfig):
    """Attributes (besides TaskConfig's; max_seq_length: the length examples are truncated and
    padded to):
      layer_indexes: encoder layers to output, as given (negative counts from the top).
      predict_batch_size: examples per step; the last batch is padded to it.
      output_file: the JSONL file (or with `pooling`, JSONL or .npy), written atomically (it
        appears only when complete).
      progress: print progress lines and a summary ("[extract_features] ...") to stderr.
      pooling, normalize (EncoderConfig's): None, the original's per-token lines; "cls",
        "mean" or "max", one embedding per line (see the module docstring).
    """
    layer_indexes: list = dataclasses.field(default_factory=lambda: [-1, -2, -3, -4])
    predict_batch_size: int = 8
    output_file: str = None
    progress: bool = True


class FeatureExtractionTask(EncoderTask):
    """The encoder's hidden states of the requested layers at every token of every example,
    written as the original's JSONL (`prepare_task` builds it).

    Args:
      config: a FeatureExtractionConfig (records: {"predict": Records((), examples padded to
        a multiple of the batch)}).
      lines: each example's unique id and tokens, in order.
      arrays: the model inputs of the examples and of the padding ones after them
        ([N, max_seq_length] int32 each), and each one's `position` in `lines` (-1: padding).
    """

    name = "extract_features"
    Config = FeatureExtractionConfig
    streams_predictions = True

    def __init__(self, config, lines, arrays):
        super().__init__(config)
        self.lines, self.arrays = lines, arrays

    def dataset_fn(self, mode, global_batch_size, seed=None):
        """The examples in order, once, in global batches of `global_batch_size` (each
        replica gets its consecutive share of every batch)."""
        if mode != "predict":
            raise ValueError(f"{self.name} only predicts, it has no {mode} data")
        arrays = self.arrays

        def make(input_context=None):
            context = input_context or tf.distribute.InputContext()
            replicas, pipelines = context.num_replicas_in_sync, context.num_input_pipelines
            per_replica = context.get_per_replica_batch_size(global_batch_size)
            dataset = tf.data.Dataset.from_tensor_slices(arrays)
            if replicas > 1:  # this pipeline's replicas' consecutive slices of each batch
                per_pipeline = replicas // pipelines
                first = context.input_pipeline_id * per_pipeline

                def slices(batch):
                    return tf.data.Dataset.from_tensor_slices({
                        name: tf.reshape(value, tf.concat([[replicas, per_replica],
                                                           tf.shape(value)[1:]], 0))
                        [first:first + per_pipeline] for name, value in batch.items()})

                dataset = dataset.batch(global_batch_size, drop_remainder=True).flat_map(slices)
            else:
                dataset = dataset.batch(per_replica, drop_remainder=True)
            if self.config.pooling is not None:  # sorted by length (prepare_task): cut padding
                dataset = dataset.map(lambda batch: trim_to_longest(
                    batch, ("input_ids", "input_mask", "segment_ids"), 1))
            options = tf.data.Options()
            options.experimental_distribute.auto_shard_policy = (
                tf.data.experimental.AutoShardPolicy.OFF)
            options.autotune.enabled = False  # see input_pipeline.tfrecord_dataset
            return dataset.with_options(options).prefetch(2)

        return make

    # ---- Predict.
    def initialize(self, model, init_checkpoint, log):
        """The checkpoint must hold the whole encoder: its load report is logged, and a
        missing encoder weight is an error (`require_complete`)."""
        report = load_checkpoint(model, init_checkpoint)
        log(str(report))
        require_complete(report, "init_checkpoint", "encoder")
        return report

    def predict_outputs(self, batch, outputs):
        layers = outputs["encoder_outputs"]
        if self.config.pooling is not None:
            # Pooling acts on each hidden unit alone: pooling the layers side by side is the
            # concatenation of each layer's pooled vector (normalized as a whole).
            hidden_states = tf.concat([tf.cast(layers[index], tf.float32)
                                       for index in self.config.layer_indexes], axis=-1)
            result = {"embedding": self.embeddings(outputs, batch["input_mask"], hidden_states)}
        else:
            result = {f"layer_output_{j}": tf.cast(layers[index], tf.float32)
                      for j, index in enumerate(self.config.layer_indexes)}
        result["position"] = batch["position"]
        return result

    @property
    def embedding_size(self):
        """The length of a pooled vector: hidden_size per layer of `layer_indexes`."""
        return self.config.bert_config.hidden_size * len(self.config.layer_indexes)

    def write_predictions(self, outputs, output_dir=None):
        """Writes the JSONL file (`output_file`; `output_dir` is not used) from `outputs`: the
        batches' outputs as they come (an iterable of dicts of numpy arrays) or all of them
        at once (one dict). Returns [output_file]."""
        lines = self.lines
        if isinstance(outputs, dict):
            outputs = [outputs]
        progress = (Progress("extract_features", total=len(lines), unit="examples")
                    if self.config.progress else None)
        if self.config.pooling is not None and self.config.output_file.endswith(".npy"):
            self._write_npy(outputs, progress)
        else:
            with atomic_open(self.config.output_file, "w") as writer:
                self._write(outputs, lines, writer, progress)
        if progress is not None:
            progress.summary(output=self.config.output_file)
        return [self.config.output_file]

    def _write_npy(self, batches, progress):
        """The pooled vectors as a float32 [lines, embedding_size] .npy file (row i: line i),
        written in place in a temporary file that becomes `output_file` when complete."""
        shape = (len(self.lines), self.embedding_size)
        with atomic_output(self.config.output_file) as tmp:
            remote = is_url(tmp)  # (gs://...: built in memory, then written whole)
            array = (np.zeros(shape, np.float32) if remote else
                     np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=shape))

            def write_example(index, batch, k):
                array[index] = batch["embedding"][k]

            self._write(batches, self.lines, None, progress, write_example)
            if remote:
                with tf.io.gfile.GFile(tmp, "wb") as f:
                    np.save(f, array)
            else:
                array.flush()
            array = None  # the memory map closed before the file is renamed

    def _write(self, batches, lines, writer, progress, write_example=None):
        """Formats and writes each batch in a writer thread while the caller's loop (the
        model) produces the next: `write_example(index, batch, k)` for the k-th row of a batch,
        line `index` (default: its JSON line to `writer`)."""
        queued = queue.Queue(maxsize=4)
        failure = []
        names = [f"layer_output_{j}" for j in range(len(self.config.layer_indexes))]

        if write_example is None and self.config.pooling is not None:
            pending, next_index = {}, [0]  # lines come sorted by length within windows

            def write_example(index, batch, k):
                pending[index] = embedding_json(lines[index].unique_id, batch["embedding"][k])
                while next_index[0] in pending:
                    writer.write(pending.pop(next_index[0]))
                    next_index[0] += 1
        elif write_example is None:
            def write_example(index, batch, k):
                writer.write(feature_json(lines[index], self.config.layer_indexes,
                                          [batch[name][k] for name in names]))

        def write_batches():
            try:
                while True:
                    batch = queued.get()
                    if batch is None:
                        return
                    count = 0
                    for k, index in enumerate(batch["position"]):
                        if index < 0:  # padding
                            continue
                        write_example(index, batch, k)
                        count += 1
                    if progress is not None:
                        progress.update(count)
            except BaseException as e:  # re-raised in the main thread
                failure.append(e)
                while queued.get() is not None:
                    pass

        thread = threading.Thread(target=write_batches, daemon=True)
        thread.start()
        try:
            for batch in batches:
                if failure:
                    break
                queued.put(batch)
        finally:
            queued.put(None)
            thread.join()
        if failure:
            raise failure[0]


def prepare_task(bert_config, tokenizer, max_seq_length, *, layer_indexes, predict_batch_size,
                 output_file, input_file=None, examples=None, progress=True, pooling=None,
                 normalize=False):
    """The FeatureExtractionTask (in a PreparedTask) of a text file's lines (`read_examples`) or
    of InputExamples: every example packed as the original's convert_examples_to_features, the
    last batch padded with empty examples (one fixed batch shape, one compiled pass).

    Args:
      bert_config: the model's BertConfig.
      tokenizer: `tokenize`, `convert_tokens_to_ids` and `convert_ids_to_tokens`
        (FastTokenizer; FullTokenizer gives the same tokens); `tokenize_batch` is used when it
        has one.
      max_seq_length, layer_indexes, predict_batch_size, output_file, progress, pooling,
        normalize: the FeatureExtractionConfig's (an unknown pooling: InputError naming it).
      input_file, examples: exactly one of them.
    """
    if (input_file is None) == (examples is None):
        raise ValueError("give exactly one of input_file and examples")
    check_pooling(pooling)  # before reading the input
    if examples is None:
        examples = read_examples(input_file)
    count = -(-len(examples) // predict_batch_size) * predict_batch_size
    arrays = {name: np.zeros((count, max_seq_length), np.int32)
              for name in ("input_ids", "input_mask", "segment_ids")}
    arrays["position"] = np.full((count,), -1, np.int32)
    lines = []
    for k, feature in enumerate(convert_examples_to_features(examples, max_seq_length,
                                                             tokenizer)):
        arrays["input_ids"][k] = feature.input_ids
        arrays["input_mask"][k] = feature.input_mask
        arrays["segment_ids"][k] = feature.input_type_ids
        arrays["position"][k] = k
        lines.append(_Example(feature.unique_id, feature.tokens))
    if pooling is not None:
        arrays = _sorted_by_length(arrays, predict_batch_size)
    config = FeatureExtractionConfig(
        bert_config=bert_config, max_seq_length=max_seq_length, layer_indexes=layer_indexes,
        predict_batch_size=predict_batch_size, output_file=output_file, progress=progress,
        pooling=pooling, normalize=normalize, records={"predict": Records((), count)})
    return PreparedTask(FeatureExtractionTask(config, lines, arrays))


def _sorted_by_length(arrays, batch_size):
    """The examples (and padding ones) sorted by length within windows of about
    SORT_WINDOW_EXAMPLES (a multiple of the batch): batches cut to their longest example then
    carry little padding, and a writer restoring line order holds one window at most."""
    window = max(1, SORT_WINDOW_EXAMPLES // batch_size) * batch_size
    lengths = arrays["input_mask"].sum(axis=1)
    if not len(lengths):
        return arrays
    order = np.concatenate([start + np.argsort(lengths[start:start + window], kind="stable")
                            for start in range(0, len(lengths), window)])
    return {name: value[order] for name, value in arrays.items()}
