"""create_pretraining_data against the reference release: the same records, exactly.

Oracle: the reference (bert-tensorflow 1.0.4 in ../shared/reference) run in-process
(`create_training_instances` + `write_instance_to_example_files`) on the same files, flags and
seed; its records are decoded and re-serialized with `SerializeToString(deterministic=True)`
and must equal ours byte for byte, record by record, file by file. Whole-word masking exists
only in google-research/bert's GitHub master, so its `create_masked_lm_predictions` (copied
below, the flag made a constant) is patched into the reference for those cases.
Corpora: ../shared/data/sample_text.txt and a WikiText-2 slice in the input format.
"""
import collections
import os
import re
import random
import signal
import subprocess
import sys

import numpy as np
import pytest

from bert_tf.tasks.pretraining.task import pretraining_feature_spec
from bert_tf.data.pretraining.corpus import iter_windows, read_corpus
from bert_tf.data.pretraining.generate import create_pretraining_data
from bert_tf.data.pretraining.instances import create_instances
from bert_tf.data.pretraining.options import InstanceOptions, VocabIds
from bert_tf.data.pretraining.python_random import (
    randbelow, random_float, rng_state, set_rng_state, shuffle)
from bert_tf.tokenization import FullTokenizer

from conftest import PROJECT_ROOT, import_bench

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# ------------------------------------------------------------------------------------------
# Helpers
# ------------------------------------------------------------------------------------------


def _tf():
    import tensorflow as tf

    return tf


def read_records(path, compression_type=None):
    """The raw records of a TFRecord file (TensorFlow's reader checks the CRCs)."""
    tf = _tf()
    return list(tf.data.TFRecordDataset(str(path), compression_type=compression_type)
                .as_numpy_iterator())


def reference_records(refbert, input_files, output_files, vocab_file, options, seed,
                      do_lower_case=True):
    """Runs the reference in-process; returns each output file's records, re-serialized
    deterministically (protobuf's default map order varies between processes)."""
    tf = _tf()
    ref = refbert.create_pretraining_data
    tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.WARN)
    tokenizer = refbert.tokenization.FullTokenizer(vocab_file, do_lower_case=do_lower_case)
    instances = ref.create_training_instances(
        [str(p) for p in input_files], tokenizer, options.max_seq_length, options.dupe_factor,
        options.short_seq_prob, options.masked_lm_prob, options.max_predictions_per_seq,
        random.Random(seed))
    ref.write_instance_to_example_files(instances, tokenizer, options.max_seq_length,
                                        options.max_predictions_per_seq,
                                        [str(p) for p in output_files])
    return [[tf.train.Example.FromString(r).SerializeToString(deterministic=True)
             for r in read_records(p)] for p in output_files]


def our_records(input_files, output_files, vocab_file, options, seed, do_lower_case=True,
                tokenizer=None):
    tokenizer = tokenizer or FullTokenizer(vocab_file, do_lower_case=do_lower_case)
    summary = create_pretraining_data(
        [str(p) for p in input_files], [str(p) for p in output_files], tokenizer, options,
        random_seed=seed, progress_interval=1e9)
    return [read_records(p) for p in output_files], summary


def wikitext_corpus(path, shared_data, num_articles, first=0):
    """WikiText-2 valid articles in the input format (as bench/data/create_pretraining_data.py)."""
    documents = import_bench("bench.common").wikitext_documents(
        [shared_data / "wikitext-2" / "valid.txt"])
    with open(path, "w", encoding="utf-8") as f:
        for sentences in documents[first:first + num_articles]:
            f.write("\n".join(sentences) + "\n\n")
    return path


@pytest.fixture(scope="module")
def wikitext_files(tmp_path_factory, shared_data):
    """Three input files (~25 WikiText-2 articles); the first ends without a blank line, so its
    last document continues into the second file, as in the original."""
    root = tmp_path_factory.mktemp("wikitext")
    files = [wikitext_corpus(root / f"part{i}.txt", shared_data, n, first)
             for i, (first, n) in enumerate([(0, 8), (8, 9), (17, 8)])]
    text = files[0].read_text(encoding="utf-8")
    files[0].write_text(text.rstrip("\n") + "\n", encoding="utf-8")
    return files


# ------------------------------------------------------------------------------------------
# CPython's Mersenne Twister, compiled
# ------------------------------------------------------------------------------------------


def test_compiled_rng_makes_cpython_draws():
    for seed in (12345, 0, 2**40 + 7):
        python_rng = random.Random(seed)
        state = rng_state(random.Random(seed))
        for n in (1, 2, 3, 4, 5, 7, 8, 9, 255, 256, 257, 30522, 2**31 - 1, 2**31, 2**32 - 1):
            assert randbelow(state, n) == python_rng._randbelow(n)
        for _ in range(700):  # crosses a state refill (624 words)
            assert random_float(state) == python_rng.random()
        for length in list(range(0, 40)) + [127, 128, 129, 1000, 5000]:
            expected = list(range(length))
            python_rng.shuffle(expected)
            ours = np.arange(length)
            shuffle(state, ours)
            assert ours.tolist() == expected
        restored = random.Random()
        set_rng_state(restored, state)
        assert restored.getstate() == python_rng.getstate()


# ------------------------------------------------------------------------------------------
# Records equal to the reference's
# ------------------------------------------------------------------------------------------

FLAG_SETS = {
    "defaults": dict(options=InstanceOptions(), seed=12345),
    "short_dense": dict(options=InstanceOptions(
        max_seq_length=64, max_predictions_per_seq=5, dupe_factor=3, masked_lm_prob=0.3,
        short_seq_prob=0.5), seed=7),
    "tiny_cased": dict(options=InstanceOptions(
        max_seq_length=16, max_predictions_per_seq=3, dupe_factor=4, masked_lm_prob=0.1,
        short_seq_prob=0.2), seed=1, do_lower_case=False),
}


@pytest.mark.parametrize("name", FLAG_SETS)
def test_sample_text_records_equal_reference(name, refbert, shared_data, uncased_vocab,
                                             tmp_path):
    flags = dict(FLAG_SETS[name])
    options, seed = flags.pop("options"), flags.pop("seed")
    inputs = [shared_data / "sample_text.txt"]
    expected = reference_records(refbert, inputs, [tmp_path / "ref.tfrecord"], uncased_vocab,
                                 options, seed, **flags)
    ours, summary = our_records(inputs, [tmp_path / "ours.tfrecord"], uncased_vocab, options,
                                seed, **flags)
    assert len(expected[0]) > 20
    assert ours == expected
    assert summary.instances == len(expected[0])


WIKITEXT_FLAG_SETS = {
    "defaults_dupe2_three_outputs": dict(options=InstanceOptions(dupe_factor=2),
                                         seed=12345, outputs=3),
    "long_seq": dict(options=InstanceOptions(
        max_seq_length=256, max_predictions_per_seq=40, dupe_factor=1, masked_lm_prob=0.1,
        short_seq_prob=0.0), seed=3, outputs=2),
    "short_seq_cased": dict(options=InstanceOptions(
        max_seq_length=24, max_predictions_per_seq=4, dupe_factor=1, masked_lm_prob=0.2,
        short_seq_prob=0.9), seed=99, outputs=1, do_lower_case=False),
}


@pytest.mark.parametrize("name", WIKITEXT_FLAG_SETS)
def test_wikitext_records_equal_reference(name, refbert, wikitext_files, uncased_vocab,
                                          tmp_path):
    flags = dict(WIKITEXT_FLAG_SETS[name])
    options, seed, outputs = flags.pop("options"), flags.pop("seed"), flags.pop("outputs")
    expected = reference_records(refbert, wikitext_files,
                                 [tmp_path / f"ref{i}.tfrecord" for i in range(outputs)],
                                 uncased_vocab, options, seed, **flags)
    ours, summary = our_records(wikitext_files,
                                [tmp_path / f"ours{i}.tfrecord" for i in range(outputs)],
                                uncased_vocab, options, seed, **flags)
    assert sum(map(len, expected)) > 300
    for ours_file, expected_file in zip(ours, expected, strict=True):
        assert len(ours_file) == len(expected_file)
        assert ours_file == expected_file
    assert list(summary.records_per_file.values()) == [len(f) for f in expected]


def test_fast_tokenizer_gives_the_same_records(refbert, wikitext_files, uncased_vocab, tmp_path):
    """--tokenizer=fast (bert_tf.text.fast_tokenization.FastTokenizer, batched) changes nothing."""
    from bert_tf.text.fast_tokenization import FastTokenizer

    options = InstanceOptions(dupe_factor=1, max_seq_length=64)
    expected = reference_records(refbert, wikitext_files, [tmp_path / "ref.tfrecord"],
                                 uncased_vocab, options, 5)
    ours, _ = our_records(wikitext_files, [tmp_path / "ours.tfrecord"], uncased_vocab, options, 5,
                          tokenizer=FastTokenizer(str(uncased_vocab)))
    assert ours == expected


def test_instance_creation_in_several_calls_is_the_same(wikitext_files, uncased_vocab):
    """The compiled loop stops and resumes (for progress lines); resuming changes nothing."""
    tokenizer = FullTokenizer(str(uncased_vocab))
    corpus = read_corpus([str(p) for p in wikitext_files], tokenizer)
    options = InstanceOptions(dupe_factor=2)
    vocab_ids = VocabIds.from_vocab(tokenizer.vocab)
    rng_whole, rng_parts = random.Random(3), random.Random(3)
    whole = create_instances(corpus, rng_whole, options, vocab_ids)
    parts = create_instances(corpus, rng_parts, options, vocab_ids,
                                              instances_per_call=7)
    assert whole.size == parts.size > 300
    for a, b in zip(whole.arrays(), parts.arrays()):
        np.testing.assert_array_equal(a[:whole.size], b[:parts.size])
    np.testing.assert_array_equal(whole.order, parts.order)
    assert rng_whole.getstate() == rng_parts.getstate()


def test_parallel_tokenization_reads_the_same_corpus(wikitext_files, uncased_vocab):
    """read_corpus with 2 processes (forked; run in a subprocess without TensorFlow) gives the
    same arrays as with one, over many blocks."""
    script = f"""
import numpy as np
from bert_tf.data.pretraining.corpus import read_corpus
from bert_tf.tokenization import FullTokenizer
files = {[str(p) for p in wikitext_files]!r}
tokenizer = FullTokenizer({str(uncased_vocab)!r})
one = read_corpus(files, tokenizer, processes=1, block_bytes=10000)
two = read_corpus(files, tokenizer, processes=2, block_bytes=10000)
for name in ("tokens", "seg_bounds", "doc_bounds"):
    np.testing.assert_array_equal(getattr(one, name), getattr(two, name))
print(one.num_documents, one.num_tokens)
"""
    result = subprocess.run([sys.executable, "-c", script], cwd=PROJECT_ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    num_documents, num_tokens = map(int, result.stdout.split())
    # 25 articles, 24 documents: the first file's last article continues into the second file
    assert num_documents == 24 and num_tokens > 80000


def test_records_parse_with_feature_spec(shared_data, uncased_vocab, tmp_path):
    tf = _tf()
    options = InstanceOptions(max_seq_length=32, max_predictions_per_seq=6,
                                               dupe_factor=1)
    [records], summary = our_records([shared_data / "sample_text.txt"],
                                     [tmp_path / "o.tfrecord"], uncased_vocab, options, 5)
    spec = pretraining_feature_spec(32, 6)
    vocab = FullTokenizer(str(uncased_vocab)).vocab
    masked_total = real_total = random_next = 0
    for record in records:
        features = {k: v.numpy() for k, v in tf.io.parse_single_example(record, spec).items()}
        assert features["masked_lm_weights"].dtype == np.float32
        length = int(features["input_mask"].sum())
        assert features["input_ids"][0] == vocab["[CLS]"]
        assert features["input_ids"][length - 1] == vocab["[SEP]"]
        assert not features["input_ids"][length:].any()
        num_masked = int(features["masked_lm_weights"].sum())
        positions = features["masked_lm_positions"][:num_masked]
        assert (np.diff(positions) > 0).all() and (positions < length).all()
        masked_total += num_masked
        real_total += length
        random_next += int(features["next_sentence_labels"][0])
    assert summary.masked_tokens == masked_total and summary.instance_tokens == real_total
    assert summary.random_next == random_next


# ------------------------------------------------------------------------------------------
# Whole-word masking (GitHub master only)
# ------------------------------------------------------------------------------------------

MaskedLmInstance = collections.namedtuple("MaskedLmInstance", ["index", "label"])


def master_create_masked_lm_predictions(tokens, masked_lm_prob, max_predictions_per_seq,
                                        vocab_words, rng):
    """google-research/bert master's create_masked_lm_predictions, FLAGS.do_whole_word_mask=True
    (otherwise verbatim)."""
    cand_indexes = []
    for (i, token) in enumerate(tokens):
        if token == "[CLS]" or token == "[SEP]":
            continue
        if (True and len(cand_indexes) >= 1 and token.startswith("##")):
            cand_indexes[-1].append(i)
        else:
            cand_indexes.append([i])
    rng.shuffle(cand_indexes)
    output_tokens = list(tokens)
    num_to_predict = min(max_predictions_per_seq,
                         max(1, int(round(len(tokens) * masked_lm_prob))))
    masked_lms = []
    covered_indexes = set()
    for index_set in cand_indexes:
        if len(masked_lms) >= num_to_predict:
            break
        if len(masked_lms) + len(index_set) > num_to_predict:
            continue
        is_any_index_covered = False
        for index in index_set:
            if index in covered_indexes:
                is_any_index_covered = True
                break
        if is_any_index_covered:
            continue
        for index in index_set:
            covered_indexes.add(index)
            masked_token = None
            if rng.random() < 0.8:
                masked_token = "[MASK]"
            else:
                if rng.random() < 0.5:
                    masked_token = tokens[index]
                else:
                    masked_token = vocab_words[rng.randint(0, len(vocab_words) - 1)]
            output_tokens[index] = masked_token
            masked_lms.append(MaskedLmInstance(index=index, label=tokens[index]))
    assert len(masked_lms) <= num_to_predict
    masked_lms = sorted(masked_lms, key=lambda x: x.index)
    masked_lm_positions = []
    masked_lm_labels = []
    for p in masked_lms:
        masked_lm_positions.append(p.index)
        masked_lm_labels.append(p.label)
    return (output_tokens, masked_lm_positions, masked_lm_labels)


def crafted_wordpiece_corpus(path, num_documents=40, seed=0):
    """Documents of invented words that WordPiece splits into several "##" pieces, mixed with
    common words, long sentences so that truncation often leaves a "##" piece first in B."""
    rng = random.Random(seed)
    syllables = ["zor", "qua", "plin", "drev", "mox", "thal", "grun", "vesk", "blor", "kwi"]
    common = ["the", "a", "of", "and", "river", "city", "walked", "quickly", "under", "bright"]
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(num_documents):
            for _ in range(rng.randint(1, 7)):
                words = []
                for _ in range(rng.randint(1, 30)):
                    if rng.random() < 0.5:
                        words.append("".join(rng.choice(syllables)
                                             for _ in range(rng.randint(2, 5))))
                    else:
                        words.append(rng.choice(common))
                f.write(" ".join(words) + " .\n")
            f.write("\n")
    return path


@pytest.mark.parametrize("max_seq_length,max_predictions,masked_lm_prob",
                         [(128, 20, 0.15), (24, 5, 0.3), (48, 3, 0.5)])
def test_whole_word_masking_equals_github_master(refbert, uncased_vocab, tmp_path, monkeypatch,
                                                 max_seq_length, max_predictions, masked_lm_prob):
    corpus = crafted_wordpiece_corpus(tmp_path / "crafted.txt")
    options = InstanceOptions(
        max_seq_length=max_seq_length, max_predictions_per_seq=max_predictions, dupe_factor=3,
        masked_lm_prob=masked_lm_prob, do_whole_word_mask=True)
    monkeypatch.setattr(refbert.create_pretraining_data, "create_masked_lm_predictions",
                        master_create_masked_lm_predictions)
    expected = reference_records(refbert, [corpus], [tmp_path / "ref.tfrecord"], uncased_vocab,
                                 options, 12345)
    [ours], _ = our_records([corpus], [tmp_path / "ours.tfrecord"], uncased_vocab, options, 12345)
    assert ours == expected[0]

    # The crafted corpus exercises what whole-word masking changes: masked words of several
    # pieces, and "##" pieces right after [SEP] (master joins them to A's last word).
    tf = _tf()
    inv_vocab = {v: k for k, v in FullTokenizer(str(uncased_vocab)).vocab.items()}
    multi_piece_words = continuation_after_sep = 0
    for record in ours:
        features = tf.train.Example.FromString(record).features.feature
        positions = list(features["masked_lm_positions"].int64_list.value)
        labels = [inv_vocab[i] for i in features["masked_lm_ids"].int64_list.value]
        segments = list(features["segment_ids"].int64_list.value)
        first_b = segments.index(1)
        masked = {p: label for p, label, w in
                  zip(positions, labels, features["masked_lm_weights"].float_list.value) if w}
        for position, label in masked.items():
            if label.startswith("##") and position not in (1, first_b):
                # a masked continuation piece: its word's previous piece is masked too (unless
                # [CLS] or [SEP] precedes it: then it starts A, or joins A's last word)
                assert position - 1 in masked
                multi_piece_words += 1
        ids = list(features["input_ids"].int64_list.value)
        # The label (not the masked input) tells what the token at first_b is.
        token_at_b = masked.get(first_b, inv_vocab[ids[first_b]])
        continuation_after_sep += token_at_b.startswith("##")
    assert multi_piece_words > 50
    assert continuation_after_sep > 0


def test_whole_word_masking_off_is_per_piece(uncased_vocab, tmp_path):
    """Without the flag, a masked "##" piece's neighbour is often unmasked (per-piece masking)."""
    tf = _tf()
    corpus = crafted_wordpiece_corpus(tmp_path / "crafted.txt")
    options = InstanceOptions(dupe_factor=2)
    [ours], _ = our_records([corpus], [tmp_path / "ours.tfrecord"], uncased_vocab, options, 1)
    inv_vocab = {v: k for k, v in FullTokenizer(str(uncased_vocab)).vocab.items()}
    lonely = 0
    for record in ours:
        features = tf.train.Example.FromString(record).features.feature
        positions = set(features["masked_lm_positions"].int64_list.value)
        for p, i in zip(features["masked_lm_positions"].int64_list.value,
                        features["masked_lm_ids"].int64_list.value):
            lonely += inv_vocab[i].startswith("##") and p - 1 not in positions
    assert lonely > 50


# ------------------------------------------------------------------------------------------
# Command line: same records, byte-identical reruns, streaming, errors, atomic output
# ------------------------------------------------------------------------------------------


def run_cli(*flags, check=True, **kwargs):
    result = subprocess.run([sys.executable, "-m", "data_tools.create_pretraining_data", *flags],
                            cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300,
                            **kwargs)
    if check and result.returncode != 0:
        raise AssertionError(result.stderr)
    return result


def test_cli_matches_reference_and_reruns_are_byte_identical(refbert, shared_data,
                                                             uncased_vocab, tmp_path):
    outputs = [tmp_path / "a.tfrecord", tmp_path / "b.tfrecord"]
    flags = [f"--input_file={shared_data / 'sample_text.txt'}",
             f"--output_file={outputs[0]},{outputs[1]}", f"--vocab_file={uncased_vocab}",
             "--dupe_factor=4", "--random_seed=42"]
    result = run_cli(*flags)
    first = [p.read_bytes() for p in outputs]
    expected = reference_records(refbert, [shared_data / "sample_text.txt"],
                                 [tmp_path / "r1.tfrecord", tmp_path / "r2.tfrecord"],
                                 uncased_vocab, InstanceOptions(dupe_factor=4),
                                 42)
    assert [read_records(p) for p in outputs] == expected
    # The summary names each file with its count, and the masked / random-next shares.
    for path, records in zip(outputs, expected):
        assert f"{path}: {len(records)} instances" in result.stderr
    assert "mean masked fraction" in result.stderr and "random next:" in result.stderr
    run_cli(*flags)
    assert [p.read_bytes() for p in outputs] == first
    # No temporary file left: the records, their manifest and its vocabulary copy.
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["a.tfrecord", "b.tfrecord", "a.tfrecord.manifest.json", "a.tfrecord.vocab.txt",
         "r1.tfrecord", "r2.tfrecord"])


def test_streaming_shards_are_deterministic_per_window(wikitext_files, uncased_vocab, tmp_path):
    common = [f"--input_file={','.join(map(str, wikitext_files))}",
              f"--vocab_file={uncased_vocab}", "--dupe_factor=2", "--window_bytes=40000",
              "--output_shards=3"]
    run_cli(*common, "--num_workers=1", f"--output_file={tmp_path / 'one'}")
    run_cli(*common, "--num_workers=2", f"--output_file={tmp_path / 'two'}")
    run_cli(*common, "--num_workers=2", "--gzip", f"--output_file={tmp_path / 'gz'}")
    names = [f"-{i:05d}-of-00003" for i in range(3)]
    one = [(tmp_path / f"one{n}").read_bytes() for n in names]
    assert one == [(tmp_path / f"two{n}").read_bytes() for n in names]
    records = [read_records(tmp_path / f"one{n}") for n in names]
    assert [read_records(tmp_path / f"gz{n}", "GZIP") for n in names] == records
    counts = [len(r) for r in records]
    assert max(counts) - min(counts) <= 1 and sum(counts) > 500  # round-robin

    # The contract: window w is the default mode run on that window's text alone with seed
    # random_seed + w, and the records of the stream go round-robin over the shards.
    tokenizer = FullTokenizer(str(uncased_vocab))
    stream = []
    windows = list(iter_windows([str(p) for p in wikitext_files], 40000))
    assert len(windows) >= 5
    for w, lines in enumerate(windows):
        text_file = tmp_path / f"window{w}.txt"
        text_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
        create_pretraining_data(
            [str(text_file)], [str(tmp_path / f"window{w}.tfrecord")], tokenizer,
            InstanceOptions(dupe_factor=2), random_seed=12345 + w,
            progress_interval=1e9)
        stream.extend(read_records(tmp_path / f"window{w}.tfrecord"))
    assert records == [stream[s::3] for s in range(3)]

    # One window holding everything, one shard: exactly the default mode.
    create_pretraining_data(
        [str(p) for p in wikitext_files], [str(tmp_path / "default.tfrecord")], tokenizer,
        InstanceOptions(dupe_factor=2), progress_interval=1e9)
    run_cli(*common[:-2], "--window_bytes=100000000", "--num_workers=2",
            f"--output_file={tmp_path / 'whole.tfrecord'}")
    assert ((tmp_path / "whole.tfrecord").read_bytes()
            == (tmp_path / "default.tfrecord").read_bytes())


def test_streaming_windows_cut_at_document_boundaries(tmp_path):
    path = tmp_path / "in.txt"
    documents = [[f"doc {d} line {i}" for i in range(d % 4 + 1)] for d in range(30)]
    path.write_text("".join("\n".join(doc) + "\n\n" for doc in documents), encoding="utf-8")
    windows = list(iter_windows([str(path)], window_bytes=50, block_bytes=64))
    assert len(windows) > 5
    assert sum(windows, []) == [line for doc in documents for line in doc + [""]]
    for window in windows:
        assert window[-1] == ""  # ends with a blank line: no document is split


def error_of(*flags):
    result = run_cli(*flags, check=False)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    return result.stderr


def test_bad_input_errors_name_flag_or_file(shared_data, uncased_vocab, tmp_path):
    sample = shared_data / "sample_text.txt"
    out = f"--output_file={tmp_path / 'o.tfrecord'}"
    vocab = f"--vocab_file={uncased_vocab}"
    assert "--input_file: no file matches" in error_of(
        f"--input_file={tmp_path / 'nothing*.txt'}", out, vocab)
    assert "--input_file: no file matches" in error_of(
        f"--input_file={tmp_path / 'missing.txt'}", out, vocab)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n\n", encoding="utf-8")
    assert "--input_file: no text in" in error_of(f"--input_file={empty}", out, vocab)
    assert "vocabulary file not found" in error_of(
        f"--input_file={sample}", out, f"--vocab_file={tmp_path / 'vocab.txt'}")
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine line\nsecond line\nthird \xff\xfe line\n")
    assert f"{bad}:3: not valid UTF-8" in error_of(f"--input_file={bad}", out, vocab)
    assert "--max_seq_length: must be at least 5" in error_of(
        f"--input_file={sample}", out, vocab, "--max_seq_length=4")
    for value in ("0", "1.5"):
        assert re.search(r"--masked_lm_prob=[0-9.]+: must be in the open interval \(0, 1\)",
                         error_of(f"--input_file={sample}", out, vocab,
                                  f"--masked_lm_prob={value}"))
    assert "--output_shards: is 2 but --output_file lists 3 files" in error_of(
        f"--input_file={sample}", f"--output_file={tmp_path / 'a'},b,c", vocab,
        "--output_shards=2")
    assert not any(tmp_path.glob("o.tfrecord*")) and not any(tmp_path.glob(".o.tfrecord*"))


@pytest.mark.parametrize("flags,named", [
    (["--window_bytes=5000"], "--window_bytes: cannot act: only the streaming mode"),
    (["--beam_options=--project=p"], "--beam_options: cannot act: only with --runner"),
])
def test_a_flag_that_cannot_act_is_refused(shared_data, uncased_vocab, tmp_path, flags, named):
    """A flag that would be silently ignored (window sizes without windows, pipeline options
    without a pipeline) is an error naming it, before any work, nothing written."""
    out = tmp_path / "o.tfrecord"
    message = error_of(f"--input_file={shared_data / 'sample_text.txt'}",
                       f"--output_file={out}", f"--vocab_file={uncased_vocab}", *flags)
    assert message.strip().splitlines()[-1].startswith(f"error: {named}"), message
    assert list(tmp_path.iterdir()) == []


def test_output_files_are_named_only_once_written(uncased_vocab, tmp_path):
    """An input that makes no record is an error that writes nothing: the output files are
    not announced as written before it (oracle: the folder, empty)."""
    empty = tmp_path / "empty.txt"
    empty.write_text("\n")
    result = subprocess.run(
        [sys.executable, "-m", "data_tools.create_pretraining_data", f"--input_file={empty}",
         f"--output_file={tmp_path / 'o.tfrecord'}", f"--vocab_file={uncased_vocab}"],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("error: --input_file: no text in")
    assert "Writing to output files" not in result.stderr and "o.tfrecord" not in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.txt"]


def test_killed_run_leaves_no_file_under_the_final_name(shared_data, uncased_vocab, tmp_path):
    corpus = tmp_path / "corpus.txt"
    text = (shared_data / "sample_text.txt").read_text(encoding="utf-8")
    corpus.write_text((text.rstrip("\n") + "\n\n") * 60, encoding="utf-8")
    output = tmp_path / "out.tfrecord"
    process = subprocess.Popen(
        [sys.executable, "-m", "data_tools.create_pretraining_data", f"--input_file={corpus}",
         f"--output_file={output}", f"--vocab_file={uncased_vocab}", "--dupe_factor=400",
         "--progress_interval=0"],
        cwd=PROJECT_ROOT, stderr=subprocess.PIPE, text=True)
    try:
        for line in process.stderr:  # instance creation has started: the output file is open
            if line.startswith("[create_instances]"):
                break
        temporary = list(tmp_path.glob(".out.tfrecord.tmp-*"))
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == -signal.SIGKILL
    assert len(temporary) == 1  # it was writing under a temporary name ...
    assert not output.exists()  # ... so nothing is under the final one
