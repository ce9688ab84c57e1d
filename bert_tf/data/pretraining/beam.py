"""create_pretraining_data's streaming mode as an Apache Beam pipeline.

The same job runs on Beam's DirectRunner on one machine and on Dataflow, Flink or Spark
unchanged (`--runner`), and writes the same files as the streaming mode
(`bert_tf.data.pretraining.streaming.create_pretraining_data_streaming`) for the same inputs,
flags, seed, `window_bytes` and number of output files, byte for byte, however the runner
splits the work, retries it or orders it. How:

1. Windows (driver): the input is cut into windows of whole documents where the streaming mode
   cuts it (`iter_window_spans`, one sequential read of the text); a window is its index and
   its byte ranges, not its text, so the pipeline's first collection stays small.
2. Instances (parallel, `WindowDoFn`): a worker reads its window's bytes and runs the
   streaming mode's `WindowProcessor` on it: `random.Random(random_seed + index)`, a function of
   the window's key and the seed only. It writes the window's records for each output file
   (record k of the window goes with k % num_outputs) to a part file named by window and group,
   under a temporary name renamed when complete: a retried bundle rewrites the same bytes.
3. Shards: where a window's groups go depends on how many records all earlier windows made
   (record k of the whole stream goes to file k % num_outputs), so the record counts per
   window are combined into prefix sums (a side input of one integer per window), each part is
   keyed by its output file, and each output file is written from its parts in window order.
   Every output file is written, empty ones too, under a temporary name renamed when complete.

Only counts, paths and byte ranges travel through Beam's shuffles; records go worker to file
system to shard writer, so a worker holds one window (or one part) at a time however large the
corpus. The driver removes the part files when the pipeline has finished. Statistics (documents,
tokens, tokens in records, masked fraction, random-next share) come back as Beam metrics.

apache-beam is an optional dependency (the `beam` extra: `pip install '.[beam]'` in a checkout).
"""
import contextlib
import os
import shlex
import uuid

from bert_tf import io_utils
from bert_tf.data.pretraining.corpus import check_documents, iter_window_spans, read_window_lines
from bert_tf.data.pretraining.streaming import WindowProcessor
from bert_tf.data.pretraining.summary import Summary
from bert_tf.data.pretraining.writers import RecordFileWriter
from bert_tf.errors import InputError, arg, argument_error

_NAMESPACE = "bert_tf.create_pretraining_data"
# The Summary's fields in the order WindowProcessor returns them, then its records' stats.
_SUMMARY_COUNTERS = ("documents", "input_tokens", "input_tokens_in_records", "records")
_COUNTERS = _SUMMARY_COUNTERS + ("instance_tokens", "masked_tokens", "random_next",
                                 "instances")


try:
    import apache_beam as beam
    from apache_beam.metrics import Metrics
    from apache_beam.metrics.metric import MetricsFilter
    from apache_beam.options.pipeline_options import PipelineOptions
except ImportError:  # an optional dependency: the functions below say how to install it
    beam = None


def _require_beam():
    if beam is None:
        raise InputError(f"{arg('runner')} needs Apache Beam: pip install 'apache-beam>=2.60' "
                         f"(bert_tf's beam extra)")


class WindowDoFn(beam.DoFn if beam else object):
    """(index, spans) -> (index, records, [(group j, part path, records)]): one window's
    records by the streaming mode's WindowProcessor, each group written to its part file."""

    def __init__(self, tokenizer_factory, options, random_seed, num_outputs, parts_dir):
        super().__init__()
        self.tokenizer_factory = tokenizer_factory
        self.options = options
        self.random_seed = random_seed
        self.num_outputs = num_outputs
        self.parts_dir = parts_dir

    def setup(self):
        self.processor = WindowProcessor(
            self.tokenizer_factory(), self.options, self.random_seed, self.num_outputs)
        self.counters = {name: Metrics.counter(_NAMESPACE, name) for name in _COUNTERS}

    def process(self, element):
        index, spans = element
        lines = read_window_lines(spans)
        documents, tokens, tokens_in_records, records, groups, stats = self.processor(index,
                                                                                      lines)
        parts = []
        for j, (data, count) in enumerate(groups):
            if count:
                path = part_path(self.parts_dir, index, j)
                writer = RecordFileWriter(path)
                writer.write(data, count)
                writer.commit()
                parts.append((j, path, count))
        for name, value in zip(_COUNTERS,
                               (documents, tokens, tokens_in_records, records) + tuple(stats)):
            self.counters[name].inc(value)
        yield index, records, parts


def part_path(parts_dir, index, group):
    return f"{parts_dir}/window-{index:09d}-group-{group:05d}.tfrecord"


def _prefix_sums(records_by_window):
    """{window: records} -> {window: records in all earlier windows}."""
    total, prefix = 0, {}
    for index in sorted(records_by_window):
        prefix[index] = total
        total += records_by_window[index]
    return prefix


def _parts_by_shard(result, prefix, num_outputs):
    index, _, parts = result
    for j, path, count in parts:
        # Record k of the window is record prefix + k of the stream: file
        # (prefix + k) % num_outputs, the same for the whole group k % num_outputs.
        yield (prefix[index] + j) % num_outputs, (index, path, count)


def _write_shard(keyed, output_files, gzip):
    shard, parts = keyed
    parts = sorted(part for part in parts if part is not None)
    writer = RecordFileWriter(output_files[shard], gzip=gzip)
    try:
        for _, path, count in parts:
            with io_utils.open_input(path, "part file") as reader:
                writer.write(reader.read(), count)
        writer.commit()
    except BaseException:
        writer.discard()
        raise
    Metrics.counter(_NAMESPACE, f"records_{shard}").inc(writer.num_records)
    return output_files[shard], writer.num_records


def pipeline_options(runner, num_workers=1, beam_options=""):
    """Beam's PipelineOptions for `runner`; DirectRunner with num_workers > 1 runs them as
    processes (multi_processing). `beam_options`: more Beam flags, as one shell-quoted string
    (for Dataflow: --project, --region, --temp_location, ...)."""
    _require_beam()
    args = [f"--runner={runner}"]
    if runner == "DirectRunner":
        mode = "multi_processing" if num_workers > 1 else "in_memory"
        args += [f"--direct_num_workers={num_workers}", f"--direct_running_mode={mode}"]
    return PipelineOptions(args + shlex.split(beam_options or ""))


def create_pretraining_data_beam(input_files, output_files, tokenizer_factory, options,
                                 options_for_beam, random_seed=12345, window_bytes=1_000_000,
                                 gzip=False, log=print):
    """Runs the pipeline (see the module docstring); returns a `Summary`.

    tokenizer_factory: a picklable callable returning the tokenizer (each worker builds its own),
    e.g. functools.partial(corpus.make_tokenizer, "full", vocab_file, True).
    options_for_beam: `pipeline_options(...)`.
    """
    _require_beam()
    options.validate()
    if window_bytes < 1:
        raise argument_error("window_bytes", f"must be positive, got {window_bytes}")
    windows = [(index, spans) for index, (spans, _) in enumerate(
        iter_window_spans(input_files, window_bytes))]
    if not windows:
        check_documents(0, input_files)
    num_outputs = len(output_files)
    log(f"{len(windows)} windows of about {window_bytes} bytes; running the pipeline")
    first = output_files[0]
    parts_dir = os.path.join(os.path.dirname(first) or ".",
                             f".{os.path.basename(first)}.parts-{uuid.uuid4().hex[:8]}")

    try:
        pipeline = beam.Pipeline(options=options_for_beam)
    except ValueError as e:  # an unknown runner
        raise argument_error("runner", str(e)) from None
    # Shards are written under temporary names, which replace output_files only once the run
    # has counted its documents: an input without any leaves a user's earlier files as they were.
    with contextlib.ExitStack() as outputs:
        staged_files = [outputs.enter_context(io_utils.atomic_output(path))
                        for path in output_files]
        try:
            with pipeline:
                results = (pipeline
                           | "Windows" >> beam.Create(windows, reshuffle=False)
                           | "Spread" >> beam.Reshuffle()
                           | "CreateInstances" >> beam.ParDo(WindowDoFn(
                               tokenizer_factory, options, random_seed, num_outputs, parts_dir)))
                prefix = (results
                          | "RecordsPerWindow" >> beam.Map(lambda r: (r[0], r[1]))
                          | "AllWindows" >> beam.combiners.ToDict()
                          | "PrefixSums" >> beam.Map(_prefix_sums))
                parts = results | "ByShard" >> beam.FlatMap(
                    _parts_by_shard, beam.pvalue.AsSingleton(prefix), num_outputs)
                every_shard = (pipeline | "Shards" >> beam.Create(range(num_outputs))
                               | "NoPart" >> beam.Map(lambda shard: (shard, None)))
                _ = ((parts, every_shard) | beam.Flatten() | "PartsOfShard" >> beam.GroupByKey()
                     | "WriteShards" >> beam.Map(_write_shard, staged_files, gzip))
            metrics = pipeline.result.metrics().query(
                MetricsFilter().with_namespace(_NAMESPACE))
        finally:
            io_utils.remove_path(parts_dir)
        counts = {}
        for counter in metrics["counters"]:
            value = counter.committed if counter.committed is not None else counter.attempted
            counts[counter.key.metric.name] = counts.get(counter.key.metric.name, 0) + value
        summary = Summary(
            options=options,
            **{name: counts.get(name, 0) for name in _SUMMARY_COUNTERS})
        summary.add_records(tuple(counts.get(name, 0)
                                  for name in _COUNTERS[len(_SUMMARY_COUNTERS):]))
        check_documents(summary.documents, input_files)
    summary.records_per_file = {path: counts.get(f"records_{i}", 0)
                                for i, path in enumerate(output_files)}
    return summary
