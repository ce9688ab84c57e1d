"""Pretraining objectives and record layouts: masked-LM only, dynamic masks, packed rows.

- packed rows: each sequence's encoder outputs, pooled output at its [CLS], masked-LM and
  next-sentence terms equal those of the sequence run alone (unpacked, padded), fast path and
  full outputs; changing one sequence changes no other's outputs;
- dynamic masks (bert_tf.tasks.pretraining.dynamic_masking) against the original's
  create_masked_lm_predictions
  (google-research/bert master's, whole-word masking) run many times: per-position masking
  frequencies and the number masked within binomial tolerance, the 80/10/10 split, never a
  token marked 0, whole words together, other masks in the next epoch, the same for the same
  (seed, index);
- objective "mlm": trains, evaluates without next_sentence_* keys (eval masks fixed: a second
  eval gives the same results), its checkpoint has no cls/seq_relationship and loads into
  BertClassifier;
- a run with dynamic masks killed with SIGKILL and resumed ends with the straight run's weights;
- bad input: one error naming the flag or file.
"""
import collections
import random
import signal
import subprocess
import sys
import time

import keras
import numpy as np
import pytest
import tensorflow as tf

import pretraining_fixtures as fx
from conftest import (PROJECT_ROOT, assert_one_line_error, assert_refused, assert_same_checkpoints,
                      command_env)
from bert_tf.tasks.pretraining import dynamic_masking
from bert_tf.data.records import write_examples
from bert_tf.data.pretraining.record_layout import PretrainingLayout
from bert_tf.tasks.pretraining.task import pretraining_feature_spec
from bert_tf.data.input_pipeline import decode_record
from bert_tf.errors import InputError, name_arguments_as_flags
from bert_tf.model.checkpoints import load_checkpoint
from bert_tf.model.config import BertConfig
from bert_tf.model.models import BertClassifier, BertPretrainer
from bert_tf.tasks.pretraining import task as pretraining
from bert_tf.tasks.pretraining.task import PretrainingConfig, PretrainingTask, pretraining_records
from bert_tf.training import runner
from bert_tf.training.settings import RunSettings

T, P, S = 32, 6, 3
CLS, SEP, MASK = 2, 3, 4
VOCAB = [f"[unused{i}]" for i in range(fx.VOCAB_SIZE)]
VOCAB[:5] = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def tiny_pretrainer(next_sentence=True, seed=0):
    keras.utils.set_random_seed(seed)
    return BertPretrainer(BertConfig.from_dict(fx.TINY_CONFIG), next_sentence=next_sentence)


# ---------------------------------------------------------------------------------------------
# Packed rows
# ---------------------------------------------------------------------------------------------


def random_sequences(rng, lengths):
    """Sequences [CLS] a.. [SEP] b.. [SEP] with segment ids, 2 masked positions and an NSP label."""
    sequences = []
    for length in lengths:
        ids = list(rng.randint(5, fx.VOCAB_SIZE, length))
        ids[0], ids[length // 2], ids[-1] = CLS, SEP, SEP
        segments = [0] * (length // 2 + 1) + [1] * (length - length // 2 - 1)
        positions = sorted(rng.choice(np.arange(1, length - 1), 2, replace=False))
        sequences.append(dict(ids=ids, segments=segments, positions=positions,
                              labels=list(rng.randint(5, fx.VOCAB_SIZE, 2)),
                              nsp=int(rng.randint(0, 2))))
    return sequences


def alone_batch(sequences):
    """Each sequence in its own row, padded (the original's layout)."""
    rows = collections.defaultdict(list)
    for seq in sequences:
        n = len(seq["ids"])
        rows["input_ids"].append(seq["ids"] + [0] * (T - n))
        rows["input_mask"].append([1] * n + [0] * (T - n))
        rows["segment_ids"].append(seq["segments"] + [0] * (T - n))
        rows["masked_lm_positions"].append(seq["positions"] + [0] * (P - 2))
        rows["masked_lm_ids"].append(seq["labels"] + [0] * (P - 2))
        rows["masked_lm_weights"].append([1.0, 1.0] + [0.0] * (P - 2))
        rows["next_sentence_labels"].append([seq["nsp"]])
    return {k: tf.constant(v, tf.float32 if k == "masked_lm_weights" else tf.int32)
            for k, v in rows.items()}


def packed_batch(groups):
    """Rows of several sequences each (`groups`: lists of sequences); returns the batch and,
    per sequence, (row, offset)."""
    rows, where = collections.defaultdict(list), []
    for r, group in enumerate(groups):
        ids, segments, positions, sequence_ids, labels, cls = [], [], [], [], [], []
        masked, masked_ids = [], []
        for s, seq in enumerate(group):
            where.append((r, len(ids)))
            cls.append(len(ids))
            masked += [len(ids) + p for p in seq["positions"]]
            masked_ids += seq["labels"]
            positions += list(range(len(seq["ids"])))
            sequence_ids += [s + 1] * len(seq["ids"])
            ids += seq["ids"]
            segments += seq["segments"]
            labels.append(seq["nsp"])
        pad = T - len(ids)
        rows["input_ids"].append(ids + [0] * pad)
        rows["input_mask"].append([1] * len(ids) + [0] * pad)
        rows["segment_ids"].append(segments + [0] * pad)
        rows["position_ids"].append(positions + [0] * pad)
        rows["sequence_ids"].append(sequence_ids + [0] * pad)
        rows["masked_lm_positions"].append(masked + [0] * (P - len(masked)))
        rows["masked_lm_ids"].append(masked_ids + [0] * (P - len(masked)))
        rows["masked_lm_weights"].append([1.0] * len(masked) + [0.0] * (P - len(masked)))
        rows["next_sentence_labels"].append(labels + [0] * (S - len(group)))
        rows["next_sentence_positions"].append(cls + [0] * (S - len(group)))
        rows["next_sentence_weights"].append([1.0] * len(group) + [0.0] * (S - len(group)))
    batch = {k: tf.constant(v, tf.float32 if k.endswith("weights") else tf.int32)
             for k, v in rows.items()}
    return batch, where


@pytest.fixture(scope="module")
def packed_case():
    rng = np.random.RandomState(3)
    sequences = random_sequences(rng, [9, 12, 8, 14, 11])
    groups = [sequences[:3], sequences[3:]]
    packed, where = packed_batch(groups)
    return sequences, packed, where, alone_batch(sequences)


def model_inputs(batch):
    names = pretraining.MODEL_INPUTS + pretraining.PACKED_INPUTS
    return {name: batch[name] for name in names if name in batch}


def test_packed_sequences_equal_the_sequences_alone(packed_case):
    sequences, packed, where, alone = packed_case
    model = tiny_pretrainer()
    full_packed = model(model_inputs(packed))
    full_alone = model(model_inputs(alone))
    fast_packed = model(model_inputs(packed), return_encoder_outputs=False)
    for i, (seq, (row, offset)) in enumerate(zip(sequences, where)):
        n, slot = len(seq["ids"]), [w[0] for w in where[:i]].count(row)
        np.testing.assert_allclose(full_packed["sequence_output"][row, offset:offset + n],
                                   full_alone["sequence_output"][i, :n], atol=1e-5)
        for layer_packed, layer_alone in zip(full_packed["encoder_outputs"],
                                             full_alone["encoder_outputs"]):
            np.testing.assert_allclose(layer_packed[row, offset:offset + n],
                                       layer_alone[i, :n], atol=1e-5)
        for outputs in (full_packed, fast_packed):
            np.testing.assert_allclose(outputs["pooled_output"][row, slot],
                                       full_alone["pooled_output"][i], atol=1e-5)
            np.testing.assert_allclose(outputs["next_sentence_log_probs"][row, slot],
                                       full_alone["next_sentence_log_probs"][i], atol=1e-5)
            np.testing.assert_allclose(outputs["masked_lm_log_probs"][row, 2 * slot:2 * slot + 2],
                                       full_alone["masked_lm_log_probs"][i, :2], atol=1e-5)


def test_packed_loss_terms_equal_the_unpacked_batch(packed_case):
    _, packed, _, alone = packed_case
    model = tiny_pretrainer()
    task = PretrainingTask()
    losses = {}
    for name, batch in (("packed", packed), ("alone", alone)):
        outputs = task.outputs(model, batch, training=False)
        metrics = task.train_metrics(batch, outputs, task.normalizers(batch))
        losses[name] = {k: float(v) for k, v in metrics.items()}
    assert float(task.normalizers(packed)["examples"]) == 5.0
    for key in losses["alone"]:
        np.testing.assert_allclose(losses["packed"][key], losses["alone"][key], rtol=1e-5,
                                   err_msg=key)
    # Per sequence, as eval sums them: the same totals, the same results.
    for name, batch in (("packed", packed), ("alone", alone)):
        outputs = task.eval_outputs(batch, task.outputs(model, batch, training=False))
        losses[name] = task.eval_results({k: v.numpy() for k, v in outputs.items()}, 0, 8)
    for key in losses["alone"]:
        np.testing.assert_allclose(losses["packed"][key], losses["alone"][key], rtol=1e-5,
                                   err_msg=key)


def test_a_packed_sequence_changes_no_other(packed_case):
    _, packed, where, _ = packed_case
    model = tiny_pretrainer()
    changed = dict(packed)
    ids = packed["input_ids"].numpy().copy()
    row, offset = where[1]  # the second sequence of the first row
    ids[row, offset + 1:offset + 4] = [7, 8, 9]
    changed["input_ids"] = tf.constant(ids)
    before, after = model(model_inputs(packed)), model(model_inputs(changed))
    first_end, third_start = where[1][1], where[2][1]
    real_end = int(packed["input_mask"][0].numpy().sum())  # padding rows attend anywhere
    seq = before["sequence_output"].numpy(), after["sequence_output"].numpy()
    np.testing.assert_array_equal(seq[0][0, :first_end], seq[1][0, :first_end])
    np.testing.assert_array_equal(seq[0][0, third_start:real_end],
                                  seq[1][0, third_start:real_end])
    np.testing.assert_array_equal(seq[0][1], seq[1][1])
    pooled = before["pooled_output"].numpy(), after["pooled_output"].numpy()
    np.testing.assert_array_equal(pooled[0][:, [0, 2]][0], pooled[1][:, [0, 2]][0])
    assert np.abs(pooled[0][0, 1] - pooled[1][0, 1]).max() > 1e-4  # the changed one moved
    assert np.abs(seq[0][0, offset:third_start] - seq[1][0, offset:third_start]).max() > 1e-3


# ---------------------------------------------------------------------------------------------
# Dynamic masks against the original's rules
# ---------------------------------------------------------------------------------------------

# A sequence of 30 tokens (+ padding): [CLS], words of 1-3 pieces, [SEP] in the middle and end.
PIECES = [1, 2, 1, 3, 1, 1, 2, 1, 1, 1, 2, 1, 1, 3, 1, 1, 1, 2, 1]  # words before/after [SEP]
SPLIT = 10  # words in sentence A


def wordpiece_case():
    tokens, marks = ["[CLS]"], [0]
    for w, pieces in enumerate(PIECES):
        if w == SPLIT:
            tokens.append("[SEP]")
            marks.append(0)
        for p in range(pieces):
            tokens.append(f"w{w}" if p == 0 else f"##p{w}{p}")
            marks.append(1 if p == 0 else 2)
    tokens.append("[SEP]")
    marks.append(0)
    return tokens, marks


def dynamic_records(tokens, marks, max_seq_length=48):
    n = len(tokens)
    ids = [CLS if t == "[CLS]" else SEP if t == "[SEP]" else 10 + i for i, t in enumerate(tokens)]
    pad = max_seq_length - n
    return {"input_ids": ids + [0] * pad, "input_mask": [1] * n + [0] * pad,
            "segment_ids": [0] * n + [0] * pad, "masked_lm_candidates": marks + [0] * pad}


def masked_stream(record, count, seed, first_index=0, masked_lm_prob=0.15, max_predictions=8,
                  vocab_size=fx.VOCAB_SIZE):
    """`count` masked copies of `record` at stream places first_index, first_index + 1, ...
    through the tf.data map of the training pipeline."""
    example = {k: tf.constant(v, tf.int32) for k, v in record.items()}
    d = tf.data.Dataset.from_tensors(example).repeat(first_index + count).enumerate()
    d = d.skip(first_index).map(lambda i, ex: dynamic_masking.mask_example(
        ex, i, dynamic_masking.stream_seed(seed), vocab_size=vocab_size, mask_id=MASK,
        masked_lm_prob=masked_lm_prob, max_predictions_per_seq=max_predictions))
    out = next(iter(d.batch(count)))
    return {k: v.numpy() for k, v in out.items()}


def binomial_close(ours, reference, n_ours, n_reference, sigmas=4.5):
    p = (ours * n_ours + reference * n_reference) / (n_ours + n_reference)
    bound = sigmas * np.sqrt(p * (1 - p) * (1 / n_ours + 1 / n_reference)) + 1e-9
    assert np.all(np.abs(ours - reference) <= bound), (ours, reference, bound)


# 30 tokens: 0.15 -> round(4.5) = 4 (half to even), 0.2 -> 6 ([CLS], [SEP] counted: 5 without),
# 0.4 -> 12, capped at 5.
@pytest.mark.parametrize("masked_lm_prob,max_predictions", [(0.15, 8), (0.2, 8), (0.4, 5)])
def test_dynamic_masks_follow_the_originals_rules(masked_lm_prob, max_predictions):
    from test_create_pretraining_data import master_create_masked_lm_predictions

    tokens, marks = wordpiece_case()
    record = dynamic_records(tokens, marks)
    n, length = 3000, len(tokens)
    ours = masked_stream(record, n, seed=5, masked_lm_prob=masked_lm_prob,
                         max_predictions=max_predictions)
    rng = random.Random(0)
    vocab_words = [f"v{i}" for i in range(fx.VOCAB_SIZE)]
    reference_masked = np.zeros((n, length))
    for k in range(n):
        _, positions, _ = master_create_masked_lm_predictions(
            tokens, masked_lm_prob, max_predictions, vocab_words, rng)
        reference_masked[k, positions] = 1
    weights = ours["masked_lm_weights"] > 0
    our_masked = np.zeros((n, 48))
    for k in range(n):
        our_masked[k, ours["masked_lm_positions"][k][weights[k]]] = 1
    # Never a token marked 0; positions ascending, unique; labels the original ids.
    assert not our_masked[:, np.array(record["masked_lm_candidates"]) == 0].any()
    for k in range(0, n, 97):
        real = ours["masked_lm_positions"][k][weights[k]]
        assert list(real) == sorted(set(real))
        assert list(ours["masked_lm_ids"][k][weights[k]]) == [
            record["input_ids"][p] for p in real]
    # Whole words together.
    word_of = np.cumsum(np.array(marks) == 1)
    for w in range(1, len(PIECES) + 1):
        pieces = np.flatnonzero((word_of[:length] == w) & (np.array(marks) > 0))
        assert (our_masked[:, pieces] == our_masked[:, pieces[:1]]).all()
    # Per-position frequencies and the number masked, as the original's.
    binomial_close(our_masked[:, :length].mean(0), reference_masked.mean(0), n, n)
    for count in range(max_predictions + 1):
        binomial_close(np.mean(our_masked.sum(1) == count),
                       np.mean(reference_masked.sum(1) == count), n, n)


def test_dynamic_masks_replace_80_10_10_and_differ_by_place():
    tokens = ["[CLS]"] + [f"w{i}" for i in range(40)] + ["[SEP]"]
    record = dynamic_records(tokens, [0] + [1] * 40 + [0], max_seq_length=48)
    n = 4000
    ours = masked_stream(record, n, seed=9, masked_lm_prob=0.15, max_predictions=8)
    assert (ours["masked_lm_weights"].sum(1) == round(42 * 0.15)).all()  # 6 each
    original = np.array(record["input_ids"])
    positions = ours["masked_lm_positions"][ours["masked_lm_weights"] > 0]
    rows = np.repeat(np.arange(n), 6)
    replaced = ours["input_ids"][rows, positions]
    total = len(replaced)
    as_mask = np.mean(replaced == MASK)
    kept = np.mean(replaced == original[positions])
    random_word = 1 - as_mask - kept
    vocabulary = fx.VOCAB_SIZE
    for share, expected in ((as_mask, 0.8 + 0.1 / vocabulary), (kept, 0.1 + 0.1 / vocabulary),
                            (random_word, 0.1 - 0.2 / vocabulary)):
        assert abs(share - expected) <= 4 * np.sqrt(expected * (1 - expected) / total)
    others = replaced[(replaced != MASK) & (replaced != original[positions])]
    assert others.min() >= 0 and others.max() < vocabulary
    # Unmasked tokens untouched.
    untouched = np.ones_like(ours["input_ids"], bool)
    untouched[rows, positions] = False
    assert (ours["input_ids"][untouched] == np.tile(original, (n, 1))[untouched]).all()
    # Same (seed, index): the same masks; another place in the stream (the next epoch) or
    # another seed: others.
    again = masked_stream(record, 50, seed=9, first_index=10)
    for key in ("input_ids", "masked_lm_positions"):
        np.testing.assert_array_equal(again[key], ours[key][10:60])
    later = masked_stream(record, 50, seed=9, first_index=n)
    other_seed = masked_stream(record, 50, seed=10)
    for other in (later, other_seed):
        same = (other["masked_lm_positions"] == ours["masked_lm_positions"][:50]).all(1)
        assert same.mean() < 0.2


def test_packed_dynamic_masks_budget_each_sequence():
    """Packed rows: each sequence's own count (the original's rule on its length), the row
    capped at max_predictions_per_seq."""
    lengths = [20, 12, 7]
    ids, marks, sequence_ids = [], [], []
    for s, n in enumerate(lengths):
        ids += [CLS] + list(range(10, 10 + n - 2)) + [SEP]
        marks += [0] + [1] * (n - 2) + [0]
        sequence_ids += [s + 1] * n
    pad = 48 - len(ids)
    example = {"input_ids": ids + [0] * pad, "input_mask": [1] * len(ids) + [0] * pad,
               "segment_ids": [0] * 48, "masked_lm_candidates": marks + [0] * pad,
               "sequence_ids": sequence_ids + [0] * pad,
               "position_ids": [p for n in lengths for p in range(n)] + [0] * pad}
    wanted = [max(1, round(n * 0.3)) for n in lengths]  # 6, 4, 2
    masked = masked_stream(example, 200, seed=1, masked_lm_prob=0.3, max_predictions=20)
    positions = masked["masked_lm_positions"]
    seq_of = np.array(example["sequence_ids"])
    for k in range(200):
        real = positions[k][masked["masked_lm_weights"][k] > 0]
        assert np.bincount(seq_of[real], minlength=4)[1:].tolist() == wanted
    capped = masked_stream(example, 200, seed=1, masked_lm_prob=0.3, max_predictions=7)
    assert (capped["masked_lm_weights"].sum(1) == 7).all()


def test_a_short_sequence_masks_one_token_as_the_original():
    """The original's num_to_predict is at least 1: a 5-token sequence at masked_lm_prob 0.1
    (round(0.5) = 0) masks one token, every time, as the original's
    create_masked_lm_predictions does on it."""
    from test_create_pretraining_data import master_create_masked_lm_predictions

    tokens = ["[CLS]", "w0", "w1", "w2", "[SEP]"]
    record = dynamic_records(tokens, [0, 1, 1, 1, 0], max_seq_length=8)
    rng = random.Random(0)
    vocab_words = [f"v{i}" for i in range(fx.VOCAB_SIZE)]
    reference = {len(master_create_masked_lm_predictions(tokens, 0.1, 4, vocab_words, rng)[1])
                 for _ in range(50)}
    assert reference == {1}
    ours = masked_stream(record, 50, seed=3, masked_lm_prob=0.1, max_predictions=4)
    assert set(ours["masked_lm_weights"].sum(1).tolist()) == reference


def test_random_replacements_cover_the_whole_vocabulary():
    """The 10% random replacements are uniform over [0, vocab_size): with a vocabulary of 12
    ids every id comes up (the last one too), each about as often (the original's
    vocab_words[rng.randint(0, len(vocab_words) - 1)], both ends included)."""
    vocabulary = 12
    tokens = ["[CLS]"] + [f"w{i}" for i in range(40)] + ["[SEP]"]
    record = dynamic_records(tokens, [0] + [1] * 40 + [0], max_seq_length=48)
    record["input_ids"] = [CLS] + [100 + i for i in range(40)] + [SEP] + [0] * 6  # not < 12
    n = 3000
    ours = masked_stream(record, n, seed=11, max_predictions=8, vocab_size=vocabulary)
    weights = ours["masked_lm_weights"] > 0
    positions = ours["masked_lm_positions"][weights]
    rows = np.repeat(np.arange(n), weights.sum(1))
    replaced = ours["input_ids"][rows, positions]
    # Ids below 12 are random draws ([MASK], id 4, is also [MASK] drawn at random).
    drawn = replaced[(replaced < vocabulary) & (replaced != MASK)]
    counts = np.bincount(drawn, minlength=vocabulary)
    expected = 0.1 * len(replaced) / vocabulary
    others = np.delete(counts, MASK)
    assert (np.abs(others - expected) <= 4.5 * np.sqrt(expected)).all(), (counts, expected)


def test_each_stream_of_a_run_masks_its_own_way():
    """stream_seed folds the stream's id (an input pipeline; eval) into the run's seed: the
    same record at the same place of two streams of one seed gets other masks, and the same
    stream gets the same ones."""
    tokens = ["[CLS]"] + [f"w{i}" for i in range(40)] + ["[SEP]"]
    record = dynamic_records(tokens, [0] + [1] * 40 + [0], max_seq_length=48)
    example = {k: tf.constant(v, tf.int32) for k, v in record.items()}

    def positions(stream_id):
        return np.stack([dynamic_masking.mask_example(
            example, index, dynamic_masking.stream_seed(7, stream_id), vocab_size=fx.VOCAB_SIZE,
            mask_id=MASK, masked_lm_prob=0.15, max_predictions_per_seq=8)[
                "masked_lm_positions"].numpy() for index in range(20)])

    first, second = positions(0), positions(1)
    np.testing.assert_array_equal(positions(0), first)
    assert (first == second).all(1).mean() < 0.2


def test_packed_row_cap_masks_only_what_it_labels():
    """Packed rows whose sequences' own counts (6 + 4 + 2) pass max_predictions_per_seq 7: the
    row's cap skips units, so that every token changed in input_ids is one of the 7 labelled
    positions (no [MASK] or random token without its label) and no sequence passes its own
    count."""
    lengths = [20, 12, 7]
    ids, sequence_ids = [], []
    for s, n in enumerate(lengths):
        ids += [CLS] + list(range(10, 10 + n - 2)) + [SEP]
        sequence_ids += [s + 1] * n
    marks = [0 if i in (CLS, SEP) else 1 for i in ids]
    pad = 48 - len(ids)
    example = {"input_ids": ids + [0] * pad, "input_mask": [1] * len(ids) + [0] * pad,
               "segment_ids": [0] * 48, "masked_lm_candidates": marks + [0] * pad,
               "sequence_ids": sequence_ids + [0] * pad,
               "position_ids": [p for n in lengths for p in range(n)] + [0] * pad}
    capped = masked_stream(example, 200, seed=2, masked_lm_prob=0.3, max_predictions=7)
    original, seq_of = np.array(example["input_ids"]), np.array(example["sequence_ids"])
    wanted = [max(1, round(n * 0.3)) for n in lengths]  # 6, 4, 2
    changed_rows = 0
    for k in range(200):
        labelled = capped["masked_lm_positions"][k][capped["masked_lm_weights"][k] > 0]
        assert len(labelled) == 7
        changed = np.flatnonzero(capped["input_ids"][k] != original)
        assert set(changed.tolist()) <= set(labelled.tolist()), (k, changed, labelled)
        assert (np.bincount(seq_of[labelled], minlength=4)[1:] <= wanted).all()
        changed_rows += len(changed) > 0
    assert changed_rows > 150


# ---------------------------------------------------------------------------------------------
# Runs
# ---------------------------------------------------------------------------------------------


def to_dynamic(example, rng):
    """A fixture record as one with dynamic masks (some tokens joined to the one before)."""
    ids = np.array(example["input_ids"])
    marks = np.zeros_like(ids)
    real = np.flatnonzero(example["input_mask"])
    marks[real[1:-1]] = np.where(rng.random_sample(len(real) - 2) < 0.3, 2, 1)
    marks[real[1]] = 1
    marks[ids == 3] = 0
    out = {k: v for k, v in example.items() if not k.startswith("masked_lm")}
    out["masked_lm_candidates"] = marks
    return out


def write(path, examples):
    write_examples(str(path), [{k: np.asarray(v).tolist() for k, v in ex.items()}
                               for ex in examples])
    return str(path)


def packed_dynamic_examples(count, seed):
    """Rows of 2-3 sequences (dynamic masks, next-sentence labels per sequence)."""
    rng = np.random.RandomState(seed)
    examples = []
    for _ in range(count):
        group = random_sequences(rng, list(rng.randint(6, 11, rng.randint(2, 4))))
        batch, _ = packed_batch([group])
        example = {k: v[0].numpy() for k, v in batch.items() if not k.startswith("masked_lm")}
        ids = example["input_ids"]
        marks = np.where(rng.random_sample(T) < 0.3, 2, 1)
        marks[(ids == CLS) | (ids == SEP) | (ids == 0)] = 0
        marks[(marks == 2) & (np.roll(marks, 1) == 0)] = 1  # a word's first piece after [CLS]
        example["masked_lm_candidates"] = marks
        examples.append(example)
    return examples


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("objectives")
    rng = np.random.RandomState(0)
    static = fx.make_examples(24, 0)
    dynamic = [to_dynamic(ex, rng) for ex in fx.make_examples(24, 1)]
    mlm_only = [{k: v for k, v in ex.items() if k != "next_sentence_labels"} for ex in dynamic]
    vocab = root / "vocab.txt"
    vocab.write_text("\n".join(VOCAB) + "\n")
    return {"root": root, "config": fx.write_config(root), "vocab": str(vocab),
            "static": write(root / "static.tfrecord", static),
            "dynamic": write(root / "dynamic.tfrecord", dynamic),
            "mlm_only": write(root / "mlm_only.tfrecord", mlm_only),
            "packed": write(root / "packed.tfrecord", packed_dynamic_examples(24, 4))}


def make_task(files, inputs, **options):
    options.setdefault("mask_id", MASK)
    options.setdefault("vocab_size_for_masking", fx.VOCAB_SIZE)
    return PretrainingTask(PretrainingConfig(
        bert_config=BertConfig.from_json_file(files["config"]), max_seq_length=fx.SEQ_LENGTH,
        max_predictions_per_seq=fx.MAX_PREDICTIONS, records=pretraining_records(inputs),
        **options))


def settings(output_dir, **changes):
    values = dict(output_dir=str(output_dir), do_train=True, do_eval=True, train_batch_size=4,
                  eval_batch_size=4, max_eval_steps=3, learning_rate=1e-3, num_train_steps=6,
                  num_warmup_steps=1, iterations_per_loop=3, save_checkpoints_steps=3,
                  log_steps=3, seed=1)
    values.update(changes)
    return RunSettings(**values)


@pytest.mark.slow
def test_mlm_only_run_and_its_checkpoint_in_a_classifier(files, tmp_path):
    """Objective mlm on records with dynamic masks and no next-sentence labels: trains,
    evaluates without next_sentence_* keys; another run's eval of its checkpoint draws the
    same eval masks (the same results); the checkpoint has no next-sentence head and loads
    into BertClassifier."""
    out = tmp_path / "mlm"
    results = runner.run(make_task(files, [files["mlm_only"]], objective="mlm"), settings(out),
                         log=lambda message: None)
    assert sorted(results) == ["global_step", "loss", "masked_lm_accuracy", "masked_lm_loss"]
    again = runner.run(make_task(files, [files["mlm_only"]], objective="mlm"),
                       settings(out, do_train=False), log=lambda message: None)
    assert again == results
    latest = tf.train.latest_checkpoint(str(out))
    assert latest.endswith("-6")
    # The checkpoint given as init_checkpoint of an eval elsewhere: the same results, its
    # step (6) included.
    from_init = runner.run(make_task(files, [files["mlm_only"]], objective="mlm"),
                           settings(tmp_path / "eval_only", do_train=False,
                                    init_checkpoint=latest), log=lambda message: None)
    assert from_init == results
    names = [name for name, _ in tf.train.list_variables(latest)]
    assert not any("seq_relationship" in name or "next_sentence" in name for name in names)
    assert '"objective": "mlm"' in (out / "bert_tf_model.json").read_text()
    classifier = BertClassifier(BertConfig.from_json_file(files["config"]), num_labels=2)
    report = load_checkpoint(classifier, latest)
    pretrainer = tiny_pretrainer(next_sentence=False, seed=3)
    tf.train.Checkpoint(model=pretrainer).restore(latest).expect_partial()
    np.testing.assert_array_equal(classifier.encoder.word_embeddings.numpy(),
                                  pretrainer.encoder.word_embeddings.numpy())
    assert sorted(report.new) == ["output_bias", "output_weights"]
    # The pooler, read by no loss, is as initialised (the seed's), not decayed.
    initial = tiny_pretrainer(next_sentence=False, seed=1)
    np.testing.assert_array_equal(pretrainer.encoder.pooler.dense.kernel.numpy(),
                                  initial.encoder.pooler.dense.kernel.numpy())
    assert not np.array_equal(pretrainer.encoder.layer_0.intermediate.kernel.numpy(),
                              initial.encoder.layer_0.intermediate.kernel.numpy())


def test_mlm_reads_the_originals_records(files, tmp_path):
    task = make_task(files, [files["static"]], objective="mlm")
    task.check_inputs(settings(tmp_path / "out"))
    assert task.config.layout == PretrainingLayout()  # static, next sentence, not packed
    assert "next_sentence_labels" not in task.feature_spec("train")
    batch = next(iter(task.dataset_fn("eval", 4)()))
    reference = next(iter(tf.data.TFRecordDataset([files["static"]]).map(
        lambda r: decode_record(r, pretraining_feature_spec(fx.SEQ_LENGTH, fx.MAX_PREDICTIONS)))
        .batch(4)))
    for name in batch:
        np.testing.assert_array_equal(batch[name], reference[name])
    outputs = task.outputs(tiny_pretrainer(next_sentence=False), batch, training=False)
    assert sorted(task.eval_outputs(batch, outputs)) == [
        "masked_lm_correct", "masked_lm_loss_sum", "masked_lm_weight"]


@pytest.mark.slow
def test_resume_after_kill_9_with_dynamic_masks(files, tmp_path):
    """Packed rows with dynamic masks and next-sentence labels, through the command line."""
    flags = dict(bert_config_file=files["config"], input_file=files["packed"],
                 vocab_file=files["vocab"], max_seq_length=fx.SEQ_LENGTH,
                 max_predictions_per_seq=fx.MAX_PREDICTIONS, do_train=True,
                 train_batch_size=4, num_train_steps=120, num_warmup_steps=10,
                 save_checkpoints_steps=20, iterations_per_loop=20, log_steps=20, seed=1,
                 learning_rate=1e-3)
    killed = tmp_path / "killed"
    line = [sys.executable, "-m", "run.run_pretraining", f"--output_dir={killed}"] + [
        f"--{k}" if v is True else f"--{k}={v}" for k, v in flags.items()]
    process = subprocess.Popen(line, cwd=PROJECT_ROOT, env=command_env(TF_CPP_MIN_LOG_LEVEL="2"),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 180
    while not tf.train.latest_checkpoint(str(killed)):
        assert process.poll() is None, "run ended before its first checkpoint"
        assert time.monotonic() < deadline
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    saved_step = int(tf.train.latest_checkpoint(str(killed)).rsplit("-", 1)[1])
    assert saved_step < 120, "the run was not killed mid-way"
    # Resumed and straight, in process (the same library as the command line).
    run_flags = dict(do_eval=False, train_batch_size=4, num_train_steps=120, num_warmup_steps=10,
                     save_checkpoints_steps=20, iterations_per_loop=20, log_steps=20, seed=1,
                     learning_rate=1e-3)
    lines = []
    runner.run(make_task(files, [files["packed"]]), settings(killed, **run_flags),
               log=lines.append)
    assert any(f"at step {saved_step}" in line for line in lines), lines
    straight = tmp_path / "straight"
    runner.run(make_task(files, [files["packed"]]), settings(straight, **run_flags),
               log=lambda message: None)
    assert_same_checkpoints(straight / "model.ckpt-120", killed / "model.ckpt-120")


@pytest.mark.slow
def test_packed_rows_train_alike_under_mirrored_and_xla_accumulation(files, tmp_path):
    """Packed rows with dynamic masks and next-sentence labels: the same loss curve on one
    device, Mirrored on 2 logical CPUs (2 rows a replica) and with 2 accumulation steps under
    --jit_compile, since the losses are normalised over the global batch."""
    flags = dict(bert_config_file=files["config"], input_file=files["packed"],
                 vocab_file=files["vocab"], max_seq_length=fx.SEQ_LENGTH,
                 max_predictions_per_seq=fx.MAX_PREDICTIONS, do_train=True, train_batch_size=4,
                 num_train_steps=4, num_warmup_steps=1, log_steps=1, seed=3, learning_rate=1e-3,
                 deterministic_input=True)
    runs = {"one_device": {},
            "mirrored": dict(distribution_strategy="mirrored", num_cpu_devices=2),
            "xla_accumulation": dict(jit_compile=True, gradient_accumulation_steps=2)}
    processes = {}
    for name, extra in runs.items():
        line = [sys.executable, "-m", "run.run_pretraining", f"--output_dir={tmp_path / name}"]
        line += [f"--{k}" if v is True else f"--{k}={v}" for k, v in {**flags, **extra}.items()]
        processes[name] = subprocess.Popen(line, cwd=PROJECT_ROOT, env=command_env(),
                                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                           text=True)
    for name, process in processes.items():
        output, _ = process.communicate(timeout=600)
        assert process.returncode == 0, f"{name}:\n{output[-3000:]}"
        # Rows hold several sequences: the progress says sequences and real tokens per second.
        progress = [line for line in output.splitlines() if line.startswith("[train]")]
        assert progress and all("sequences/s" in line and "tokens/s" in line
                                and "examples/s" not in line for line in progress), progress
    curves = {name: fx.loss_curve(tmp_path / name) for name in runs}
    assert len(curves["one_device"]) == 4
    for name in ("mirrored", "xla_accumulation"):
        np.testing.assert_allclose(curves[name], curves["one_device"], rtol=1e-5, err_msg=name)


def test_packed_rows_count_their_sequences_and_real_tokens(files):
    """What the progress line counts of packed rows (`Task.throughput`): sequences (oracle:
    the [CLS] tokens, one per sequence) and real tokens (oracle: the ids that are not [PAD]);
    rows of one sequence pair count as examples."""
    task = make_task(files, [files["packed"]])
    task.detect_layout([files["packed"]])
    assert task.throughput_units == ("sequences", "tokens")
    batch = next(iter(tf.data.TFRecordDataset(files["packed"]).map(
        lambda record: tf.io.parse_single_example(record, task.feature_spec("train"))).batch(24)))
    counts = task.throughput(batch)
    ids = batch["input_ids"].numpy()
    assert float(counts["sequences"]) == (ids == CLS).sum() > len(ids)
    assert float(counts["tokens"]) == (ids != 0).sum()
    unpacked = make_task(files, [files["static"]])
    unpacked.detect_layout([files["static"]])
    assert unpacked.throughput_units == () and unpacked.throughput(batch) == {}


# ---------------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------------


def check(task, tmp_path):
    with name_arguments_as_flags():
        with pytest.raises(InputError) as info:
            task.check_inputs(settings(tmp_path / "never"))
        return str(info.value)


def test_bad_input_names_the_flag_or_file(files, tmp_path):
    message = check(make_task(files, [files["mlm_only"]]), tmp_path)
    assert message.startswith("--objective: mlm_nsp needs next_sentence_labels")
    assert files["mlm_only"] in message
    message = check(make_task(files, [files["static"], files["dynamic"]]), tmp_path)
    assert message.startswith(f"{files['dynamic']}: its records hold dynamic masks")
    message = check(make_task(files, [files["dynamic"]], mask_id=None,
                              vocab_size_for_masking=None), tmp_path)
    assert message.startswith("--vocab_file: required for records with dynamic masks")
    message = check(make_task(files, [files["dynamic"]], masked_lm_prob=1.0), tmp_path)
    assert message.startswith("--masked_lm_prob: must be in (0, 1)")
    with pytest.raises(InputError, match="objective"):
        make_task(files, [files["static"]], objective="nsp")


@pytest.mark.slow
def test_command_line_refuses_bad_masking_flags(files, tmp_path):
    base = dict(bert_config_file=files["config"], input_file=files["dynamic"],
                output_dir=tmp_path / "out", do_train=True,
                max_seq_length=fx.SEQ_LENGTH, max_predictions_per_seq=fx.MAX_PREDICTIONS)
    assert_one_line_error("run.run_pretraining", dict(base, masked_lm_prob=0),
                          "--masked_lm_prob=0.0: must be in the open interval (0, 1)")
    assert_one_line_error("run.run_pretraining", dict(base, dropout=1),
                          "--dropout=1.0: must be in [0, 1)")
    big = tmp_path / "big_vocab.txt"
    big.write_text("\n".join(VOCAB + ["extra"]) + "\n")
    assert_one_line_error("run.run_pretraining", dict(base, vocab_file=big),
                          f"--vocab_file: {big} has {fx.VOCAB_SIZE + 1} entries but the "
                          f"model's vocab_size is {fx.VOCAB_SIZE}")
    mlm_only = dict(base, input_file=files["mlm_only"], vocab_file=files["vocab"])
    last = assert_one_line_error("run.run_pretraining", mlm_only,
                                 "--objective: mlm_nsp needs next_sentence_labels")
    assert files["mlm_only"] in last


@pytest.mark.slow
def test_a_flag_that_cannot_act_on_the_records_is_refused(files, tmp_path):
    """--masked_lm_prob on records with static masks (which hold their own rate),
    --do_lower_case without a vocabulary to record it with, --shuffle_buffer_size with unshuffled
    input, an objective the records cannot train, --dropout without training, and
    --dropout_from_step without dropout or past the last step: one error line
    naming the flag and the file, exit 2, before any step, and no --output_dir created."""
    base = dict(bert_config_file=files["config"], output_dir=tmp_path / "out", do_train=True,
                max_seq_length=fx.SEQ_LENGTH, max_predictions_per_seq=fx.MAX_PREDICTIONS)
    assert_refused("run.run_pretraining", dict(base, input_file=files["static"],
                                               masked_lm_prob=0.4),
                   f"error: --masked_lm_prob: cannot act on {files['static']}: its records "
                   f"hold static masks", tmp_path)
    assert_refused("run.run_pretraining", dict(base, input_file=files["static"],
                                               do_lower_case=False),
                   "error: --do_lower_case: cannot act: it is the casing of the run's "
                   "vocabulary, and no --vocab_file is given", tmp_path)
    assert_refused("run.run_pretraining", dict(base, input_file=files["static"],
                                               deterministic_input=True, shuffle_buffer_size=8),
                   "error: --shuffle_buffer_size: cannot act: --deterministic_input reads the "
                   "records in file order, unshuffled", tmp_path)
    assert_refused("run.run_pretraining", dict(base, input_file=files["mlm_only"],
                                               vocab_file=files["vocab"]),
                   "--objective: mlm_nsp needs next_sentence_labels", tmp_path)
    assert_refused("run.run_pretraining", dict(base, input_file=files["static"], do_train=False,
                                               do_eval=True, dropout=0),
                   "error: --dropout: cannot act: only training uses dropout, and --do_train "
                   "is not given", tmp_path)
    assert_refused("run.run_pretraining", dict(base, input_file=files["static"],
                                               dropout_from_step=2),
                   "error: --dropout_from_step: cannot act: the model trains without dropout "
                   "(its config's, or --dropout=0)", tmp_path)
    assert_refused("run.run_pretraining", dict(base, input_file=files["static"], dropout=0.1,
                                               num_train_steps=4, dropout_from_step=4),
                   "error: --dropout_from_step: cannot act: dropout would not turn on before "
                   "--num_train_steps=4", tmp_path)
