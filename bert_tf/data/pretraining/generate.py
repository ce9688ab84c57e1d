"""create_pretraining_data's default mode: exactly the original's records, order and output
files (`create_pretraining_data`), reading the whole corpus, creating every instance and
shuffling them globally, as the original does.
"""
import os
import random

import numpy as np

from bert_tf.data.pretraining.corpus import check_documents, join_documents, read_corpus
from bert_tf.data.pretraining.instances import create_instances, tokens_in_instances
from bert_tf.data.pretraining.options import VocabIds
from bert_tf.data.pretraining.rows import make_rows
from bert_tf.data.pretraining.serializer import serialize_rows
from bert_tf.data.pretraining.summary import Summary
from bert_tf.data.pretraining.writers import record_writers
from bert_tf.progress import Progress


WRITE_BATCH = 8192  # records serialized per call (bounds the serialization buffer)


def write_instances(instances, corpus, options, vocab_ids, writers, summary, progress=None,
                    rows=None):
    """The original's write_instance_to_example_files: output order, round-robin over files
    (of rows, when packed: `rows`, by default `make_rows`)."""
    rows = rows if rows is not None else make_rows(instances, options)
    num_rows = len(rows)
    num_writers = len(writers)
    for start in range(0, num_rows, WRITE_BATCH):
        stop = min(start + WRITE_BATCH, num_rows)
        for w, writer in enumerate(writers):
            # Record k (in output order) goes to file k % num_writers.
            first = start + (w - start) % num_writers
            row_ids = np.arange(first, stop, num_writers)
            if len(row_ids) == 0:
                continue
            data, _, stats = serialize_rows(instances, corpus, options, vocab_ids, rows, row_ids)
            writer.write(data, len(row_ids))
            summary.add_records(stats)
        if progress is not None:
            progress.update(stop - start)
    summary.records += num_rows


def create_pretraining_data(input_files, output_files, tokenizer, options, random_seed=12345,
                            gzip=False, processes=1, progress_interval=10.0):
    """Default mode: exactly the original's records, order and output files.

    `tokenizer` is a FullTokenizer or FastTokenizer (same tokens), `options` the original's
    flags (`InstanceOptions`; its layout fields default to the original's records);
    tokenization runs in `processes` processes (same result).
    Reads everything, creates every instance (compactly) and shuffles them globally, as the
    original does; memory grows with the corpus (see the streaming mode for corpora that do not
    fit). Returns a `Summary`.
    """
    options.validate()
    vocab_ids = VocabIds.from_vocab(tokenizer.vocab)
    summary = Summary(options=options)
    with record_writers(output_files, gzip=gzip) as writers:
        reading = Progress("read+tokenize", unit="lines", secondary_unit="tokens",
                           interval=progress_interval)
        corpus = read_corpus(input_files, tokenizer, processes, progress=reading)
        check_documents(corpus.num_documents, input_files)
        reading.summary(documents=corpus.num_documents, tokens=corpus.num_tokens)
        summary.documents = corpus.num_documents
        summary.input_tokens = corpus.num_tokens
        if options.cross_documents:
            corpus = join_documents(corpus, vocab_ids.sep_id)

        creating = Progress("create_instances", total=corpus.num_documents * options.dupe_factor,
                            unit="documents", secondary_unit="instances",
                            interval=progress_interval)
        instances = create_instances(corpus, random.Random(random_seed), options, vocab_ids,
                                     progress=creating)
        creating.summary(instances=len(instances))
        summary.input_tokens_in_records = tokens_in_instances(instances, corpus)

        rows = make_rows(instances, options)
        writing = Progress("write", total=len(rows), unit="records", interval=progress_interval)
        write_instances(instances, corpus, options, vocab_ids, writers, summary, progress=writing,
                        rows=rows)
        writing.summary()
        for writer in writers:
            summary.records_per_file[writer.path] = writer.num_records
    return summary


def default_processes(input_files, min_bytes=4_000_000):
    """Tokenization processes for the default mode: one per CPU for inputs of 4 MB or more."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:
        cpus = os.cpu_count() or 1
    size = sum(os.path.getsize(p) for p in input_files if "://" not in p and os.path.isfile(p))
    return cpus if size >= min_bytes else 1
