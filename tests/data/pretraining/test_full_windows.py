"""create_pretraining_data's full windows (--full_windows, --cross_documents) and the summary's
count of the input tokens in records and dropped, for every layout.

Oracles: raw WikiText-2 valid (a paragraph a line, as a new user has it) tokenized independently
(FullTokenizer line by line, documents split at blank lines, `split("\\n")` as the original
reads); the expected windows are numpy slices of each document's tokens (or of the documents
joined with [SEP]); the records are parsed with the reader's spec. Coverage: a boolean array
over the corpus's token positions, set from the instances' spans, whose tokens are checked
against the decoded records; the original's masking rule for the number of masks.
"""
import collections
import random
import re

import numpy as np
import pytest

from bert_tf.data.pretraining.corpus import (
    Corpus, iter_windows, join_documents, make_tokenizer, read_corpus)
from bert_tf.data.pretraining.generate import create_pretraining_data
from bert_tf.data.pretraining.instances import (
    Instances, create_instances, tokens_in_instances)
from bert_tf.data.pretraining.options import InstanceOptions, VocabIds
from bert_tf.data.pretraining.streaming import create_pretraining_data_streaming
from bert_tf.data.pretraining.summary import Summary
from bert_tf.tokenization import FullTokenizer
from conftest import assert_refused, require_module
from test_create_pretraining_data import run_cli
from test_pretraining_layouts import parse, sequences_of

WINDOWS = dict(objective="mlm", full_windows=True)


@pytest.fixture(scope="module")
def tokenizer(uncased_vocab):
    return FullTokenizer(str(uncased_vocab), do_lower_case=True)


@pytest.fixture(scope="module")
def wikitext(tmp_path_factory, shared_data):
    """The first 160 lines of raw WikiText-2 valid: headings and paragraphs, blank lines
    between them (so documents of one line and of several), some lines longer than 128
    tokens."""
    lines = (shared_data / "wikitext-2" / "valid.txt").read_text(encoding="utf-8").split("\n")
    path = tmp_path_factory.mktemp("wikitext_raw") / "valid160.txt"
    path.write_text("\n".join(lines[:160]) + "\n", encoding="utf-8")
    return path


def oracle_documents(lines, tokenizer):
    """Each document's token ids (int32 arrays): lines stripped, a blank line ends a document,
    a document without tokens is none."""
    docs, current = [], []
    for line in lines:
        line = line.strip()
        if not line:
            docs.append(current)
            current = []
        else:
            current += tokenizer.convert_tokens_to_ids(tokenizer.tokenize(line))
    docs.append(current)
    return [np.array(doc, np.int32) for doc in docs if doc]


def documents_of(path, tokenizer):
    return oracle_documents(path.read_text(encoding="utf-8").split("\n"), tokenizer)


def expected_windows(docs, window, sep_id=None):
    """The windows' token tuples: each document's tokens cut every `window` tokens, or (sep_id
    given) the documents joined with one sep_id between consecutive ones, cut so."""
    streams = docs if sep_id is None else [np.concatenate(
        [piece for doc in docs for piece in (doc, [sep_id])][:-1]).astype(np.int32)]
    return [tuple(stream[i:i + window].tolist()) for stream in streams
            for i in range(0, len(stream), window)]


def write(path, output, tokenizer, seed=3, **flags):
    options = InstanceOptions(**flags)
    summary = create_pretraining_data([str(path)], [str(output)], tokenizer, options,
                                      random_seed=seed, progress_interval=1e9)
    return options, summary


def restored(record, options):
    """(input ids with the masked positions' labels put back, real length)."""
    ids = record["input_ids"].copy()
    if options.masking == "static":
        n = int(record["masked_lm_weights"].sum())
        ids[record["masked_lm_positions"][:n]] = record["masked_lm_ids"][:n]
    return ids, int(record["input_mask"].sum())


# ------------------------------------------------------------------------------------------
# The corpus transformation and the coverage count
# ------------------------------------------------------------------------------------------


def test_join_documents_puts_one_separator_between_documents(wikitext, tokenizer):
    corpus = read_corpus([str(wikitext)], tokenizer)
    docs = documents_of(wikitext, tokenizer)
    assert corpus.num_documents == len(docs) > 20
    sep = tokenizer.vocab["[SEP]"]
    joined = join_documents(corpus, sep)
    expected = np.concatenate([piece for doc in docs for piece in (doc, [sep])][:-1])
    np.testing.assert_array_equal(joined.tokens, expected)
    assert joined.tokens.dtype == np.int32 and joined.num_documents == 1
    np.testing.assert_array_equal(joined.separators,
                                  np.cumsum([len(doc) + 1 for doc in docs])[:-1] - 1)
    assert joined.num_tokens - len(joined.separators) == corpus.num_tokens == sum(map(len, docs))
    # Segments: the input's lines, and each separator a segment of its own.
    lengths = np.diff(joined.seg_bounds)
    assert lengths.sum() == len(joined.tokens) and (lengths > 0).all()
    one_token = joined.seg_bounds[:-1][lengths == 1]
    assert set(joined.separators.tolist()) <= set(one_token.tolist())
    assert len(lengths) == len(corpus.seg_bounds) - 1 + len(docs) - 1
    single = Corpus(corpus.tokens[:10], np.array([0, 4, 10]), np.array([0, 2]))
    same = join_documents(single, sep)
    assert same.tokens is single.tokens and len(same.separators) == 0


def test_tokens_in_instances_is_the_union_of_the_spans():
    rng = np.random.default_rng(0)
    num_tokens = 5000
    corpus = Corpus(np.zeros(num_tokens, np.int32), np.array([0, num_tokens]), np.array([0, 1]),
                    np.sort(rng.choice(num_tokens, 300, replace=False)).astype(np.int64))
    for n, longest in ((1, 50), (40, 60), (300, 40), (2000, 3)):
        instances = Instances(1, n)
        instances.size = n
        instances.a_len[:] = rng.integers(0, longest, n)
        instances.b_len[:] = rng.integers(0, longest, n) * rng.integers(0, 2, n)
        instances.a_start[:] = rng.integers(0, num_tokens - instances.a_len)
        instances.b_start[:] = rng.integers(0, num_tokens - instances.b_len)
        covered = np.zeros(num_tokens, bool)
        for i in range(n):
            covered[instances.a_start[i]:instances.a_start[i] + instances.a_len[i]] = True
            covered[instances.b_start[i]:instances.b_start[i] + instances.b_len[i]] = True
        covered[corpus.separators] = False
        assert tokens_in_instances(instances, corpus) == covered.sum() > 0
    assert tokens_in_instances(Instances(1, 0), corpus) == 0


# ------------------------------------------------------------------------------------------
# Full windows: every token, in the windows expected
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("masking,cross", [("static", False), ("static", True),
                                           ("dynamic", False), ("dynamic", True)])
def test_full_windows_hold_every_token(wikitext, tokenizer, tmp_path, masking, cross):
    dupe = 2
    options, summary = write(wikitext, tmp_path / "windows", tokenizer, max_seq_length=64,
                             max_predictions_per_seq=10, dupe_factor=dupe, masking=masking,
                             cross_documents=cross, **WINDOWS)
    records = parse(tmp_path / "windows", options)
    cls, sep = tokenizer.vocab["[CLS]"], tokenizer.vocab["[SEP]"]
    docs = documents_of(wikitext, tokenizer)
    window = options.max_seq_length - 2
    expected = expected_windows(docs, window, sep if cross else None)
    assert len(expected) > (100 if cross else len(docs))
    if not cross:  # only a document's last window is short
        assert sum(len(w) < window for w in expected) <= len(docs)
    got = collections.Counter()
    masks_of = collections.defaultdict(list)
    inner_separators = 0
    for record in records:
        ids, length = restored(record, options)
        assert ids[0] == cls and ids[length - 1] == sep and not ids[length:].any()
        assert (record["input_mask"][:length] == 1).all() and not record["segment_ids"].any()
        text = tuple(ids[1:length - 1].tolist())
        got[text] += 1
        assert cls not in text
        inner = np.flatnonzero(ids[:length] == sep)[:-1]
        inner_separators += len(inner)
        if masking == "static":
            n = int(record["masked_lm_weights"].sum())
            positions = record["masked_lm_positions"][:n]
            # The original's rule: round(length * masked_lm_prob), at least 1, at most
            # max_predictions_per_seq, of the tokens other than [CLS]/[SEP].
            assert n == min(options.max_predictions_per_seq,
                            max(1, int(round(length * options.masked_lm_prob))))
            assert (np.diff(positions) > 0).all() and positions.min() > 0
            assert not set(positions.tolist()) & set(inner.tolist())
            assert sep not in record["masked_lm_ids"][:n]
            masks_of[text].append(tuple(positions.tolist()))
        else:
            candidates = record["masked_lm_candidates"]
            special = (ids == cls) | (ids == sep) | (record["input_mask"] == 0)
            np.testing.assert_array_equal(candidates, np.where(special, 0, 1))
    # Each window dupe_factor times, nothing else: every token of every document, dupe times.
    assert got == collections.Counter({w: c * dupe for w, c in
                                       collections.Counter(expected).items()})
    assert inner_separators == (len(docs) - 1 if cross else 0) * dupe
    if masking == "static":  # the copies have masks of their own
        pairs = [m for text, m in masks_of.items() if len(m) == dupe and len(text) == window]
        assert sum(m[0] != m[1] for m in pairs) > 0.9 * len(pairs) > 50
    tokens = sum(map(len, docs))
    assert (summary.input_tokens, summary.input_tokens_in_records) == (tokens, tokens)
    assert summary.text_line() == (f"text: {tokens} input tokens, {tokens} in records, "
                                   f"0 dropped (0.00%)")
    assert summary.instances == len(records) == dupe * len(expected)
    layout = ("full windows across documents" if cross else "full windows")
    assert f"  layout: {options.describe()}" in summary.format()
    assert options.describe().endswith(f"masked-LM only, {layout}")


def test_packing_keeps_the_full_windows(wikitext, tokenizer, tmp_path):
    flags = dict(max_seq_length=96, dupe_factor=2, max_predictions_per_seq=14, **WINDOWS)
    plain_options, plain = write(wikitext, tmp_path / "plain", tokenizer, **flags)
    options, packed = write(wikitext, tmp_path / "packed", tokenizer, pack_sequences=True,
                            **flags)
    plain_records = parse(tmp_path / "plain", plain_options)
    packed_records = parse(tmp_path / "packed", options)
    assert packed.instances == plain.instances == len(plain_records)
    assert len(packed_records) == packed.records < 0.8 * len(plain_records)
    assert (collections.Counter(s for r in packed_records for s in sequences_of(r, options))
            == collections.Counter(s for r in plain_records
                                   for s in sequences_of(r, plain_options)))
    assert packed.input_tokens_in_records == packed.input_tokens == plain.input_tokens


# ------------------------------------------------------------------------------------------
# Streaming and Beam
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cross", [False, True])
def test_streaming_full_windows(wikitext, tokenizer, tmp_path, cross):
    options = InstanceOptions(max_seq_length=64, dupe_factor=2, cross_documents=cross,
                              **WINDOWS)
    default = create_pretraining_data([str(wikitext)], [str(tmp_path / "default")], tokenizer,
                                      options, random_seed=6, progress_interval=1e9)
    whole = create_pretraining_data_streaming(
        [str(wikitext)], [str(tmp_path / "whole")], tokenizer, options, random_seed=6,
        window_bytes=10**9, progress_interval=1e9)
    assert (tmp_path / "whole").read_bytes() == (tmp_path / "default").read_bytes()
    assert whole.text_line() == default.text_line()

    shards = {workers: [tmp_path / f"w{workers}-{i}" for i in range(2)] for workers in (1, 2)}
    summaries = {workers: create_pretraining_data_streaming(
        [str(wikitext)], [str(p) for p in paths], tokenizer, options, random_seed=6,
        num_workers=workers, window_bytes=6000, progress_interval=1e9)
        for workers, paths in shards.items()}
    assert [p.read_bytes() for p in shards[1]] == [p.read_bytes() for p in shards[2]]
    # Window by window: its documents' windows (joined within the streaming window).
    sep = tokenizer.vocab["[SEP]"]
    streaming_windows = list(iter_windows([str(wikitext)], 6000))
    assert len(streaming_windows) >= 5
    expected = collections.Counter(
        w for lines in streaming_windows
        for w in expected_windows(oracle_documents(lines, tokenizer), 62, sep if cross else None))
    got = collections.Counter()
    for path in shards[1]:
        for record in parse(path, options):
            ids, length = restored(record, options)
            got[tuple(ids[1:length - 1].tolist())] += 1
    assert got == collections.Counter({w: 2 * c for w, c in expected.items()})
    tokens = sum(map(len, documents_of(wikitext, tokenizer)))
    assert summaries[1].input_tokens == summaries[1].input_tokens_in_records == tokens
    assert summaries[2].text_line() == summaries[1].text_line()


def test_beam_full_windows_across_documents(wikitext, uncased_vocab, tokenizer, tmp_path):
    require_module("apache_beam", "create_pretraining_data --runner")
    import functools
    from bert_tf.data.pretraining import beam as pretraining_beam

    options = InstanceOptions(max_seq_length=64, dupe_factor=2, cross_documents=True,
                              **WINDOWS)
    shards = {mode: [str(tmp_path / f"{mode}{i}") for i in range(2)]
              for mode in ("streaming", "beam")}
    streaming = create_pretraining_data_streaming(
        [str(wikitext)], shards["streaming"], tokenizer, options, random_seed=2,
        window_bytes=6000, progress_interval=1e9)
    beam = pretraining_beam.create_pretraining_data_beam(
        [str(wikitext)], shards["beam"],
        functools.partial(make_tokenizer, "full", str(uncased_vocab), True), options,
        pretraining_beam.pipeline_options("DirectRunner"), random_seed=2, window_bytes=6000,
        log=lambda message: None)
    assert ([open(p, "rb").read() for p in shards["beam"]]
            == [open(p, "rb").read() for p in shards["streaming"]])
    assert (beam.input_tokens, beam.input_tokens_in_records, beam.instances) == (
        streaming.input_tokens, streaming.input_tokens_in_records, streaming.instances)
    assert beam.input_tokens == beam.input_tokens_in_records > 10000


# ------------------------------------------------------------------------------------------
# The summary's text line for the original's cutting: what it drops
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("flags", [dict(), dict(objective="mlm", masking="dynamic")],
                         ids=["original", "mlm_dynamic"])
def test_summary_counts_the_tokens_the_original_layout_drops(wikitext, tokenizer, tmp_path,
                                                             flags):
    flags = dict(max_seq_length=128, dupe_factor=1, **flags)
    options, summary = write(wikitext, tmp_path / "records", tokenizer, seed=8, **flags)
    # The same instances, to see their spans: the spans' tokens are the records' text.
    corpus = read_corpus([str(wikitext)], tokenizer)
    instances = create_instances(corpus, random.Random(8), options,
                                 VocabIds.from_vocab(tokenizer.vocab))
    cls, sep = tokenizer.vocab["[CLS]"], tokenizer.vocab["[SEP]"]
    covered = np.zeros(corpus.num_tokens, bool)
    spans = collections.Counter()
    for i in range(len(instances)):
        a, la = instances.a_start[i], instances.a_len[i]
        b, lb = instances.b_start[i], instances.b_len[i]
        covered[a:a + la] = True
        covered[b:b + lb] = True
        text = [cls, *corpus.tokens[a:a + la], sep]
        if options.next_sentence:
            text += [*corpus.tokens[b:b + lb], sep]
        spans[tuple(int(t) for t in text)] += 1
    records = parse(tmp_path / "records", options)
    assert spans == collections.Counter(
        tuple(ids[:length].tolist()) for ids, length in (restored(r, options) for r in records))
    docs = documents_of(wikitext, tokenizer)
    tokens = sum(map(len, docs))
    in_records = int(covered.sum())
    assert summary.input_tokens == tokens and summary.input_tokens_in_records == in_records
    assert summary.dropped_tokens == tokens - in_records > 0.1 * tokens  # long lines truncated
    line = f"  text: {tokens} input tokens, {in_records} in records, {tokens - in_records} dropped"
    text_line = [x for x in summary.format().splitlines() if x.startswith("  text: ")]
    assert len(text_line) == 1 and text_line[0].startswith(line)
    share = re.fullmatch(r".* dropped \((\d+\.\d\d)%\)", text_line[0]).group(1)
    assert float(share) == round(100 * (tokens - in_records) / tokens, 2)


def test_summary_text_line_without_input():
    assert Summary().text_line() == "text: 0 input tokens, 0 in records, 0 dropped (0.00%)"


# ------------------------------------------------------------------------------------------
# Command line
# ------------------------------------------------------------------------------------------


def test_command_line_full_windows(wikitext, uncased_vocab, tokenizer, tmp_path):
    output = tmp_path / "cli.tfrecord"
    result = run_cli(f"--input_file={wikitext}", f"--output_file={output}",
                     f"--vocab_file={uncased_vocab}", "--objective=mlm", "--masking=dynamic",
                     "--full_windows", "--cross_documents", "--max_seq_length=64",
                     "--random_seed=4")
    _, summary = write(wikitext, tmp_path / "lib", tokenizer, seed=4, max_seq_length=64,
                       dupe_factor=1, masking="dynamic", cross_documents=True, **WINDOWS)
    assert output.read_bytes() == (tmp_path / "lib").read_bytes()
    tokens = sum(map(len, documents_of(wikitext, tokenizer)))
    lines = result.stderr.splitlines()
    assert f"  text: {tokens} input tokens, {tokens} in records, 0 dropped (0.00%)" in lines
    assert ("  layout: dynamic masks, masked-LM only, full windows across documents"
            in lines)


@pytest.mark.parametrize("flags,named", [
    (["--full_windows"], "--full_windows: needs --objective=mlm"),
    (["--objective=mlm_nsp", "--full_windows", "--cross_documents"],
     "--full_windows: needs --objective=mlm"),
    (["--objective=mlm", "--cross_documents"], "--cross_documents: needs --full_windows"),
    (["--objective=mlm", "--full_windows", "--short_seq_prob=0.2"],
     "--short_seq_prob: cannot act: --full_windows cuts every window"),
])
def test_flags_that_cannot_act_are_refused(shared_data, uncased_vocab, tmp_path, flags, named):
    output = tmp_path / "out" / "o.tfrecord"
    output.parent.mkdir()
    assert_refused("data_tools.create_pretraining_data",
                   [f"--input_file={shared_data / 'sample_text.txt'}",
                    f"--output_file={output}", f"--vocab_file={uncased_vocab}", *flags],
                   named, tmp_path)
    assert list(output.parent.iterdir()) == []


@pytest.mark.parametrize("flags,argument", [
    (dict(full_windows=True), "full_windows"),
    (dict(objective="mlm", cross_documents=True), "cross_documents"),
])
def test_options_name_the_field(flags, argument):
    with pytest.raises(ValueError, match=f"^{argument}: needs "):
        InstanceOptions(**flags).validate()
