"""create_pretraining_data's streaming mode: the input cut into windows of whole documents,
each made into records like the default mode makes a whole corpus (`WindowProcessor`, also the
Beam pipeline's), in parallel processes, records round-robin over the output files in window
order; memory bounded whatever the corpus size.
"""
import dataclasses
import random

import numpy as np

from bert_tf.data.pretraining.corpus import (
    Corpus, CorpusBuilder, check_documents, iter_windows, join_documents, tokenize_lines)
from bert_tf.data.pretraining.instances import create_instances, tokens_in_instances
from bert_tf.data.pretraining.options import InstanceOptions, VocabIds
from bert_tf.data.pretraining.rows import make_rows
from bert_tf.data.pretraining.serializer import serialize_rows
from bert_tf.data.pretraining.summary import Summary
from bert_tf.data.pretraining.workers import ordered_map, worker_state
from bert_tf.data.pretraining.writers import record_writers
from bert_tf.errors import argument_error
from bert_tf.progress import Progress


def load_compiled_functions():
    """Loads (compiling if not cached yet) every compiled function, on a two-document corpus."""
    corpus = Corpus(np.arange(5, 11, dtype=np.int32), np.array([0, 2, 4, 6], np.int64),
                    np.array([0, 2, 3], np.int64))
    vocab_ids = VocabIds({}, 0, 1, 2, np.arange(12, dtype=np.int32), np.zeros(12, np.bool_))
    options = InstanceOptions(max_seq_length=8, dupe_factor=1)
    for layout in (options, dataclasses.replace(options, masking="dynamic", objective="mlm",
                                                 pack_sequences=True),
                   dataclasses.replace(options, objective="mlm", full_windows=True)):
        instances = create_instances(corpus, random.Random(0), layout, vocab_ids)
        rows = make_rows(instances, layout)
        serialize_rows(instances, corpus, layout, vocab_ids, rows, np.arange(len(rows)))


class WindowProcessor:
    """One streaming window to its records: tokenize its lines, create instances with
    `random.Random(random_seed + index)` exactly as the default mode does for a whole corpus,
    and serialize them grouped by output file. Everything it uses is on the object (no module
    state): the streaming mode calls it in worker processes, the Beam pipeline
    (`bert_tf.data.pretraining.beam`) in its DoFn.

    Calling it with (index, lines) returns (documents, input tokens, input tokens in records,
    records, groups, stats): groups[j] = (framed TFRecord bytes, count) holds the records whose
    index k in the window's output order has k % num_outputs == j; stats = (instance tokens,
    masked, random next, instances). Records are rows (`make_rows`): packing, if any, stays
    within a window; so do documents joined by `cross_documents`.
    """

    def __init__(self, tokenizer, options, random_seed, num_outputs):
        self.tokenizer = tokenizer
        self.options = options
        self.vocab_ids = VocabIds.from_vocab(tokenizer.vocab)
        self.random_seed = random_seed
        self.num_outputs = num_outputs

    def __call__(self, index, lines):
        builder = CorpusBuilder()
        builder.add(*tokenize_lines(self.tokenizer, self.tokenizer.vocab, lines))
        corpus = builder.build()
        num_documents, num_tokens = corpus.num_documents, corpus.num_tokens
        if self.options.cross_documents:
            corpus = join_documents(corpus, self.vocab_ids.sep_id)
        instances = create_instances(corpus, random.Random(self.random_seed + index),
                                     self.options, self.vocab_ids)
        rows = make_rows(instances, self.options)
        groups = []
        stats = np.zeros(4, np.int64)
        for j in range(self.num_outputs):
            row_ids = np.arange(j, len(rows), self.num_outputs)
            data, _, group_stats = serialize_rows(instances, corpus, self.options,
                                                  self.vocab_ids, rows, row_ids)
            groups.append((data.tobytes(), len(row_ids)))  # bytes unpickle without a copy
            stats += group_stats
        return (num_documents, num_tokens, tokens_in_instances(instances, corpus), len(rows),
                groups, tuple(stats.tolist()))


def _process_window(item):
    return worker_state["processor"](*item)


def create_pretraining_data_streaming(input_files, output_files, tokenizer, options,
                                      random_seed=12345, num_workers=1, window_bytes=2_000_000,
                                      gzip=False, progress_interval=10.0):
    """Streaming mode: bounded memory, parallel workers, one output file per shard.

    The input (files in order, as one stream of lines) is cut into windows of consecutive whole
    documents of about `window_bytes` bytes of text (`iter_windows`). Window w (0, 1, ...) is
    processed exactly like the default mode processes the whole corpus, with
    `random.Random(random_seed + w)`: its documents are shuffled, each is turned into instances
    `dupe_factor` times, random-next segments are drawn from documents *of the same window*, and
    the window's instances are shuffled. Records then go round-robin over the output files in
    window order, continuing across windows: record k of the whole stream goes to file
    k % len(output_files).

    So each output file is a deterministic function of the inputs, vocabulary, flags, seed,
    `window_bytes` and the number of output files; the number of workers only changes the
    speed. (With one window holding the whole corpus this is exactly the default mode.)
    Memory is bounded by about (num_workers + 1) windows' text and records, whatever the corpus
    size. Returns a `Summary`.
    """
    options.validate()
    if window_bytes < 1:
        raise argument_error("window_bytes", f"must be positive, got {window_bytes}")
    state = {"processor": WindowProcessor(tokenizer, options, random_seed, len(output_files))}
    if num_workers > 1:
        load_compiled_functions()  # once here: forked workers inherit them
    summary = Summary(options=options)
    progress = Progress("create_pretraining_data", unit="documents", secondary_unit="records",
                        interval=progress_interval)
    num_outputs = len(output_files)
    with record_writers(output_files, gzip=gzip) as writers:
        windows = enumerate(iter_windows(input_files, window_bytes))
        written = 0
        for num_docs, num_tokens, tokens_in_records, num_records, groups, stats in ordered_map(
                _process_window, windows, num_workers, state, max_in_flight=num_workers + 1):
            summary.documents += num_docs
            summary.input_tokens += num_tokens
            summary.input_tokens_in_records += tokens_in_records
            summary.records += num_records
            summary.add_records(stats)
            # Record k of the window is record written + k of the stream: file
            # (written + k) % num_outputs, the same for the whole group k % num_outputs.
            for j, (data, count) in enumerate(groups):
                if count:
                    writers[(written + j) % num_outputs].write(data, count)
            written += num_records
            progress.update(num_docs, secondary=num_records, instances=summary.instances)
        check_documents(summary.documents, input_files)
        for writer in writers:
            summary.records_per_file[writer.path] = writer.num_records
    progress.summary(instances=summary.instances)
    return summary
