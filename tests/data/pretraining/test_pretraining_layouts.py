"""create_pretraining_data's layouts beyond the original's: dynamic masks, masked-LM only, packed.

Oracles: the records are parsed with `features.pretraining_feature_spec` (the reader's spec) and
checked against the input text tokenized independently (FullTokenizer per document), the
vocabulary ("##" pieces, [CLS]/[SEP]) and, for packing, the unpacked records the same seed and
flags make: packing must only regroup those instances.
"""
import collections
import functools
import pathlib
import random

import numpy as np
import pytest

from bert_tf.data.pretraining.corpus import make_tokenizer, read_corpus
from bert_tf.data.pretraining.generate import create_pretraining_data
from bert_tf.data.pretraining.instances import create_instances
from bert_tf.data.pretraining.options import InstanceOptions, VocabIds
from bert_tf.data.pretraining.rows import make_rows, _pack_rows
from bert_tf.data.pretraining.streaming import create_pretraining_data_streaming
from bert_tf.data.pretraining.record_layout import PretrainingLayout, pretraining_layout_of
from bert_tf.tasks.pretraining.task import pretraining_feature_spec
from bert_tf.data.input_pipeline import first_record_lengths
from bert_tf.data.pretraining.record_stats import count_tokens
from bert_tf.tokenization import FullTokenizer
from conftest import assert_one_line_error, require_module
from test_create_pretraining_data import crafted_wordpiece_corpus, run_cli

Options = InstanceOptions


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("layouts") / "corpus.txt"
    return crafted_wordpiece_corpus(path, num_documents=30, seed=3)


@pytest.fixture(scope="module")
def tokenizer(uncased_vocab):
    return FullTokenizer(str(uncased_vocab), do_lower_case=True)


def write(corpus, tokenizer, path, seed=5, **options):
    """Writes records in-process; returns (options, summary)."""
    options = Options(**options)
    summary = create_pretraining_data(
        [str(corpus)], [str(path)], tokenizer, options, random_seed=seed, progress_interval=1e9)
    return options, summary


def layout_of(options):
    """The PretrainingLayout the spec gives to records written with `options`."""
    packed_nsp = options.pack_sequences and options.objective == "mlm_nsp"
    return PretrainingLayout(options.masking, options.objective == "mlm_nsp",
                             options.pack_sequences,
                             options.sequences_per_row if packed_nsp else 0)


def parse(path, options):
    """The records parsed with the reader's spec for options' layout, as numpy dicts; checks
    that the records' features give that layout back."""
    import tensorflow as tf

    layout = layout_of(options)
    lengths = first_record_lengths(str(path))
    assert pretraining_layout_of(lengths) == layout
    spec = pretraining_feature_spec(options.max_seq_length, options.max_predictions_per_seq,
                                    layout)
    assert lengths == {name: feature.shape[0] for name, feature in spec.items()}
    dataset = tf.data.TFRecordDataset(str(path)).map(
        lambda r: tf.io.parse_single_example(r, spec))
    return list(dataset.as_numpy_iterator())


def documents_lines(corpus, tokenizer):
    """Each document's lines as token ids, tokenized on their own (blank lines separate
    documents)."""
    docs, current = [], []
    for line in pathlib.Path(corpus).read_text(encoding="utf-8").splitlines():
        if not line.strip():
            if current:
                docs.append(current)
            current = []
        else:
            current.append(tokenizer.convert_tokens_to_ids(tokenizer.tokenize(line)))
    if current:
        docs.append(current)
    return docs


def documents_tokens(corpus, tokenizer):
    """Each document's token ids."""
    return [sum(lines, []) for lines in documents_lines(corpus, tokenizer)]


def contains(haystack, needle):
    n = len(needle)
    return any(haystack[i:i + n] == needle for i in range(len(haystack) - n + 1))


def sequences_of(record, options):
    """The record's sequences as hashable tuples (tokens, segments, masked (position, label,
    id written), next-sentence label), positions within the sequence."""
    ids = record["input_ids"]
    length = int(record["input_mask"].sum())
    if options.pack_sequences:
        starts = [k for k in range(length) if k == 0 or record["sequence_ids"][k]
                  != record["sequence_ids"][k - 1]]
    else:
        starts = [0]
    bounds = starts + [length]
    masked = []
    if options.masking == "static":
        n = int(record["masked_lm_weights"].sum())
        masked = list(zip(record["masked_lm_positions"][:n], record["masked_lm_ids"][:n]))
    out = []
    for s, (start, stop) in enumerate(zip(bounds, bounds[1:])):
        mine = tuple((int(p) - start, int(label), int(ids[p])) for p, label in masked
                     if start <= p < stop)
        label = int(record["next_sentence_labels"][s]) if options.next_sentence else None
        out.append((tuple(ids[start:stop].tolist()),
                    tuple(record["segment_ids"][start:stop].tolist()), mine, label))
    assert sum(len(m) for _, _, m, _ in out) == len(masked)  # every mask inside a sequence
    return out


# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("whole_word", [True, False])
def test_dynamic_candidates_mark_units(corpus, tokenizer, tmp_path, whole_word):
    path = tmp_path / "dynamic.tfrecord"
    options, summary = write(corpus, tokenizer, path, max_seq_length=48, dupe_factor=1,
                             masking="dynamic", do_whole_word_mask=whole_word)
    records = parse(path, options)
    assert len(records) == summary.instances > 20 and summary.masked_tokens == 0
    cls, sep = tokenizer.vocab["[CLS]"], tokenizer.vocab["[SEP]"]
    is_piece = {i for t, i in tokenizer.vocab.items() if t.startswith("##")}
    joined = 0
    for record in records:
        ids, mask, cands = record["input_ids"], record["input_mask"], record["masked_lm_candidates"]
        special = (ids == cls) | (ids == sep) | (mask == 0)
        assert ((cands == 0) == special).all()
        previous_real = np.concatenate([[False], ~special[:-1]])
        piece = np.array([i in is_piece for i in ids])
        expected_two = piece & previous_real & ~special if whole_word else np.zeros_like(piece)
        assert ((cands == 2) == expected_two).all()
        assert set(np.unique(cands)) <= {0, 1, 2}
        joined += int(expected_two.sum())
    assert (joined > 50) == whole_word  # the corpus has many "##" pieces


@pytest.mark.parametrize("masking", ["static", "dynamic"])
def test_mlm_objective_is_one_span_of_one_document(corpus, tokenizer, tmp_path, masking):
    path = tmp_path / "mlm.tfrecord"
    options, summary = write(corpus, tokenizer, path, max_seq_length=40, dupe_factor=2,
                             max_predictions_per_seq=6, objective="mlm", masking=masking)
    records = parse(path, options)
    assert "next_sentence_labels" not in records[0] and summary.random_next == 0
    assert len(records) == summary.instances > 30
    docs = documents_tokens(corpus, tokenizer)
    lines_of_docs = documents_lines(corpus, tokenizer)
    spans = {tuple(sum(lines[a:b], [])) for lines in lines_of_docs
             for a in range(len(lines)) for b in range(a + 1, len(lines) + 1)}
    cls, sep = tokenizer.vocab["[CLS]"], tokenizer.vocab["[SEP]"]
    for record in records:
        length = int(record["input_mask"].sum())
        assert 3 <= length <= options.max_seq_length
        assert (record["input_mask"][:length] == 1).all()
        assert not record["segment_ids"].any()
        ids = record["input_ids"].copy()
        if masking == "static":  # the text before masking
            n = int(record["masked_lm_weights"].sum())
            assert 1 <= n <= options.max_predictions_per_seq
            ids[record["masked_lm_positions"][:n]] = record["masked_lm_ids"][:n]
        assert ids[0] == cls and ids[length - 1] == sep
        text = ids[1:length - 1].tolist()
        assert cls not in text and sep not in text
        assert sum(contains(doc, text) for doc in docs) >= 1, "crosses a document"
        # Whole consecutive lines, or a part of one line longer than an instance.
        assert (tuple(text) in spans
                or (len(text) == options.max_seq_length - 2
                    and any(contains(line, text) for lines in lines_of_docs for line in lines)))
        assert not ids[length:].any()


LAYOUTS = {
    "static_nsp": dict(),
    "dynamic_nsp": dict(masking="dynamic", dupe_factor=2),
    "static_mlm": dict(objective="mlm"),
    "dynamic_mlm_capped": dict(masking="dynamic", objective="mlm", max_sequences_per_row=3),
}


@pytest.mark.parametrize("name", LAYOUTS)
def test_packing_regroups_the_same_instances(corpus, tokenizer, tmp_path, name):
    flags = dict(max_seq_length=128, max_predictions_per_seq=20, dupe_factor=3,
                 short_seq_prob=0.5, do_whole_word_mask=True)
    flags.update(LAYOUTS[name])
    plain_options, plain_summary = write(corpus, tokenizer, tmp_path / "plain", **flags)
    options, summary = write(corpus, tokenizer, tmp_path / "packed", pack_sequences=True,
                             **flags)
    plain = parse(tmp_path / "plain", plain_options)
    packed = parse(tmp_path / "packed", options)
    assert summary.instances == plain_summary.instances == len(plain)
    assert len(packed) == summary.records < len(plain)
    padding = summary.padding_fraction(summary.records)
    assert padding < 0.7 * plain_summary.padding_fraction(len(plain))

    expected = collections.Counter(s for r in plain for s in sequences_of(r, plain_options))
    got = collections.Counter(s for r in packed for s in sequences_of(r, options))
    assert got == expected

    cls, sep, mask_id = (tokenizer.vocab[t] for t in ("[CLS]", "[SEP]", "[MASK]"))
    docs = documents_tokens(corpus, tokenizer)
    S = options.sequences_per_row
    masks = kept = predicted = 0
    for record in packed:
        length = int(record["input_mask"].sum())
        assert (record["input_mask"][:length] == 1).all()
        assert not record["input_mask"][length:].any()
        seq_ids, pos_ids, ids = record["sequence_ids"], record["position_ids"], record["input_ids"]
        starts = [k for k in range(length) if pos_ids[k] == 0]
        assert starts[0] == 0 and all(ids[k] == cls for k in starts)
        assert [k for k in range(length) if ids[k] == cls] == starts
        n = len(starts)
        assert 1 <= n <= S
        for s, (a, b) in enumerate(zip(starts, starts[1:] + [length])):
            assert (pos_ids[a:b] == np.arange(b - a)).all()
            assert (seq_ids[a:b] == s + 1).all()
        assert not seq_ids[length:].any() and not pos_ids[length:].any()
        if options.next_sentence:
            assert record["next_sentence_positions"][:n].tolist() == starts
            assert record["next_sentence_weights"].tolist() == [1.0] * n + [0.0] * (S - n)
            assert not record["next_sentence_positions"][n:].any()
            assert not record["next_sentence_labels"][n:].any()
        if options.masking == "static":
            k = int(record["masked_lm_weights"].sum())
            assert 1 <= k <= options.max_predictions_per_seq
            positions = record["masked_lm_positions"][:k]
            assert (np.diff(positions) > 0).all()
            labels = record["masked_lm_ids"][:k]
            assert (pos_ids[positions] != 0).all() and (seq_ids[positions] >= 1).all()
            masks += int((ids[positions] == mask_id).sum())
            kept += int((ids[positions] == labels).sum())
            predicted += k
            # The labels are the text's tokens there: with them put back, every segment of
            # every sequence is a span of one input document.
            restored = ids.copy()
            restored[positions] = labels
            assert cls not in labels and sep not in labels
        else:
            restored = ids
        spans = np.split(restored[:length], np.flatnonzero(np.isin(restored[:length],
                                                                   [cls, sep])))
        for span in spans:
            text = span[1:].tolist()  # after its [CLS] or [SEP]
            assert not text or any(contains(doc, text) for doc in docs)
    if options.masking == "static":  # the original's 80% [MASK], 10% kept, 10% random
        assert 0.7 < masks / predicted < 0.9 and 0.03 < kept / predicted < 0.2
    if S < 5:
        assert max(int(r["sequence_ids"].max()) for r in packed) == S


@pytest.mark.parametrize("masking", ["static", "dynamic"])
def test_rows_fill_well_and_keep_the_shuffled_order(corpus, tokenizer, tmp_path, masking):
    # Lines cut to their first words: instances of every length.
    short = tmp_path / "short.txt"
    short.write_text("\n".join(" ".join(line.split()[:5]) for line in
                               corpus.read_text(encoding="utf-8").splitlines()) + "\n",
                     encoding="utf-8")
    options = Options(max_seq_length=128, dupe_factor=4, short_seq_prob=0.8, objective="mlm",
                      masking=masking, pack_sequences=True, max_sequences_per_row=6)
    vocab_ids = VocabIds.from_vocab(tokenizer.vocab)
    instances = create_instances(
        read_corpus([str(short)], tokenizer), random.Random(1), options,
        vocab_ids)
    rows = make_rows(instances, options)
    n = len(instances)
    assert sorted(rows.members.tolist()) == list(range(n))
    rank = np.empty(n, np.int64)
    rank[instances.order] = np.arange(n)  # place in the shuffled order
    lengths = instances.a_len[:n].astype(np.int64) + 2
    for r in range(len(rows)):
        members = rows.members[rows.bounds[r]:rows.bounds[r + 1]]
        assert 1 <= len(members) <= 6
        assert (np.diff(rank[members]) > 0).all()
        assert lengths[members].sum() <= options.max_seq_length
        assert instances.num_masked[members].sum() <= options.max_predictions_per_seq
    firsts = rank[rows.members[rows.bounds[:-1]]]
    assert (np.diff(firsts) > 0).all()  # rows come in the order of their first instance
    # Close to a lower bound of the rows needed: by tokens, by masked predictions, and one row
    # for each instance longer than half a row.
    T, P = options.max_seq_length, options.max_predictions_per_seq
    fewest = max(-(-lengths.sum() // T), -(-instances.num_masked[:n].sum() // P),
                 (lengths > T // 2).sum())
    assert fewest <= len(rows) <= (1.02 if masking == "dynamic" else 1.1) * fewest + 1


def test_a_row_fills_to_its_exact_limits():
    """Best-fit packing by hand: two instances whose tokens together are exactly
    max_seq_length, or whose masked predictions together are exactly
    max_predictions_per_seq, fit one row ("at most" both limits); one token or prediction more
    needs a second row."""
    def rows(lengths, masked, max_len=128, max_masked=20, max_seqs=6):
        lengths, masked = np.array(lengths, np.int64), np.array(masked, np.int64)
        bin_of = np.empty(len(lengths), np.int64)
        count = _pack_rows(np.argsort(-lengths, kind="stable"), lengths,
                                            masked, max_len, max_masked, max_seqs,
                                            int(lengths.min()), bin_of)
        return count, bin_of.tolist()

    assert rows([64, 64], [5, 5]) == (1, [0, 0])  # 128 tokens
    assert rows([65, 64], [5, 5]) == (2, [0, 1])
    assert rows([40, 30], [12, 8]) == (1, [0, 0])  # 20 predictions
    assert rows([40, 30], [12, 9]) == (2, [0, 1])
    assert rows([10, 10, 10], [1, 1, 1], max_seqs=2) == (2, [0, 0, 1])


def test_streaming_shares_the_layouts(corpus, tokenizer, tmp_path):
    # One window holding the whole corpus and one shard: the default mode's records.
    options = Options(max_seq_length=64, dupe_factor=2, masking="dynamic", objective="mlm",
                      pack_sequences=True)
    create_pretraining_data(
        [str(corpus)], [str(tmp_path / "default")], tokenizer, options, random_seed=9,
        progress_interval=1e9)
    summary = create_pretraining_data_streaming(
        [str(corpus)], [str(tmp_path / "streaming")], tokenizer, options, random_seed=9,
        window_bytes=10**9, progress_interval=1e9)
    assert (tmp_path / "streaming").read_bytes() == (tmp_path / "default").read_bytes()
    # Several windows: every row packed within its window, records as parsed by the reader.
    shards = [str(tmp_path / f"shard{i}") for i in range(2)]
    windowed = create_pretraining_data_streaming(
        [str(corpus)], shards, tokenizer, options, random_seed=9, window_bytes=2000,
        progress_interval=1e9)
    records = [r for shard in shards for r in parse(shard, options)]
    assert len(records) == windowed.records and windowed.records >= summary.records
    assert sum(len(sequences_of(r, options)) for r in records) == windowed.instances


def test_token_counts_of_record_files(corpus, tokenizer, tmp_path):
    for name, flags in (("plain", {}), ("packed", dict(pack_sequences=True, masking="dynamic"))):
        path = tmp_path / name
        options, summary = write(corpus, tokenizer, path, max_seq_length=64, dupe_factor=1,
                                 **flags)
        records = parse(path, options)
        counts = count_tokens(str(path))
        real = sum(int(r["input_mask"].sum()) for r in records)
        assert counts.records == len(records) and counts.real_tokens == real
        assert counts.sequences == sum(len(sequences_of(r, options)) for r in records)
        assert counts.layout == layout_of(options)
        assert counts.padding_fraction == pytest.approx(1 - real / (64 * len(records)))
        assert counts.padding_fraction == pytest.approx(summary.padding_fraction(summary.records))


def test_options_name_the_bad_argument():
    for bad, argument in ((dict(masking="random"), "masking"), (dict(objective="nsp"), "objective"),
                          (dict(max_sequences_per_row=-1), "max_sequences_per_row")):
        with pytest.raises(ValueError, match=f"^{argument}: "):
            Options(**bad).validate()


def test_command_line(corpus, uncased_vocab, tmp_path, tokenizer):
    # Dynamic masking: one copy of the data unless --dupe_factor is given.
    output = tmp_path / "cli.tfrecord"
    result = run_cli(f"--input_file={corpus}", f"--output_file={output}",
                     f"--vocab_file={uncased_vocab}", "--masking=dynamic", "--objective=mlm",
                     "--pack_sequences", "--max_seq_length=64", "--random_seed=4")
    _, summary = write(corpus, tokenizer, tmp_path / "lib", seed=4, max_seq_length=64,
                       dupe_factor=1, masking="dynamic", objective="mlm", pack_sequences=True)
    assert output.read_bytes() == (tmp_path / "lib").read_bytes()
    assert (f"packing: {summary.instances} rows before, {summary.records} after"
            in result.stderr)
    assert "padding fraction" in result.stderr
    assert_one_line_error("data_tools.create_pretraining_data",
                          {"input_file": corpus, "output_file": tmp_path / "e.tfrecord",
                           "vocab_file": uncased_vocab, "pack_sequences": True,
                           "max_sequences_per_row": 0},
                          "--max_sequences_per_row=0: must be a positive integer")
    assert_one_line_error("data_tools.create_pretraining_data",
                          {"input_file": corpus, "output_file": tmp_path / "e.tfrecord",
                           "vocab_file": uncased_vocab, "max_sequences_per_row": 4},
                          "--max_sequences_per_row: cannot act: only with --pack_sequences")
    assert not list(tmp_path.glob("*e.tfrecord*"))


def test_beam_writes_the_streaming_modes_packed_files(corpus, uncased_vocab, tokenizer, tmp_path):
    require_module("apache_beam", "create_pretraining_data --runner")
    from bert_tf.data.pretraining import beam as pretraining_beam

    options = Options(max_seq_length=128, dupe_factor=2, short_seq_prob=0.5,
                      pack_sequences=True)
    shards = {mode: [str(tmp_path / f"{mode}{i}") for i in range(2)]
              for mode in ("streaming", "beam")}
    streaming = create_pretraining_data_streaming(
        [str(corpus)], shards["streaming"], tokenizer, options, random_seed=2, window_bytes=2000,
        progress_interval=1e9)
    beam = pretraining_beam.create_pretraining_data_beam(
        [str(corpus)], shards["beam"],
        functools.partial(make_tokenizer, "full", str(uncased_vocab), True),
        options, pretraining_beam.pipeline_options("DirectRunner"), random_seed=2,
        window_bytes=2000, log=lambda message: None)
    assert ([pathlib.Path(p).read_bytes() for p in shards["beam"]]
            == [pathlib.Path(p).read_bytes() for p in shards["streaming"]])
    assert (beam.records, beam.instances, beam.instance_tokens, beam.masked_tokens) == (
        streaming.records, streaming.instances, streaming.instance_tokens,
        streaming.masked_tokens)
    assert streaming.instances > streaming.records > 0


def test_run_pretraining_reads_what_create_pretraining_data_writes(corpus, tokenizer, tmp_path):
    """The writer and the reader agree: packed rows with dynamic whole-word masks and
    next-sentence labels, written by create_pretraining_data, go through run_pretraining's
    input pipeline (PretrainingTask.dataset_fn): the layout is detected, masks fall only on
    words of the text (never [CLS], [SEP] or padding) inside their own sequence, whole words
    together, and each next-sentence position is a [CLS]."""
    from bert_tf.tasks.pretraining.task import PretrainingConfig, PretrainingTask, pretraining_records

    path = tmp_path / "packed.tfrecord"
    options, _ = write(corpus, tokenizer, path, masking="dynamic", pack_sequences=True,
                       do_whole_word_mask=True, max_seq_length=64, max_predictions_per_seq=10)
    rows = parse(path, options)
    cls_id, sep_id, mask_id = tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]", "[MASK]"])
    task = PretrainingTask(PretrainingConfig(
        max_seq_length=64, max_predictions_per_seq=10, records=pretraining_records([str(path)]),
        mask_id=mask_id, vocab_size_for_masking=len(tokenizer.vocab), deterministic_input=True))
    assert task.detect_layout([str(path)]) == layout_of(options)
    batches = task.dataset_fn("train", len(rows), seed=7)(None)
    batch = {name: value.numpy() for name, value in next(iter(batches)).items()}
    pieces = tokenizer.convert_ids_to_tokens(range(len(tokenizer.vocab)))
    masked_units = 0
    for row, original in enumerate(rows):  # file order: deterministic_input
        ids, sequences = original["input_ids"], batch["sequence_ids"][row]
        weights = batch["masked_lm_weights"][row]
        positions = batch["masked_lm_positions"][row][weights > 0]
        assert len(positions) > 0
        np.testing.assert_array_equal(batch["masked_lm_ids"][row][weights > 0], ids[positions])
        assert not set(ids[positions]) & {cls_id, sep_id, 0}
        masked = set(positions.tolist())
        for p in positions:  # a masked "##" piece's word is masked from its start
            start = p
            while pieces[ids[start]].startswith("##") and ids[start - 1] not in (cls_id, sep_id):
                start -= 1
                assert start in masked, (row, p)
            masked_units += not pieces[ids[p]].startswith("##")
        real = batch["next_sentence_weights"][row] > 0
        np.testing.assert_array_equal(ids[batch["next_sentence_positions"][row][real]], cls_id)
        assert set(sequences[batch["next_sentence_positions"][row][real]]) == set(
            sequences[sequences > 0])
    assert masked_units > len(rows)
