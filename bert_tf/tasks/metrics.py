"""Evaluation metrics of the fine-tuning tasks, in numpy, with the numbers of the usual oracles.

- GLUE: `accuracy`, `f1_binary` (MRPC, QQP: F1 of class 1), `matthews_corrcoef` (CoLA),
  `pearson` / `spearman` (STS-B). Each gives what scikit-learn's `accuracy_score`, `f1_score`,
  `matthews_corrcoef` and scipy's `pearsonr`, `spearmanr` give on the same rows; they are here so
  that fine-tuning needs neither package at run time.
- Per class: `confusion_matrix` and `per_class_scores` (scikit-learn's `confusion_matrix` and
  `precision_recall_fscore_support` with every class listed).
- Multi-label (multi-hot [examples, labels] arrays): `multi_label_counts`
  (`multilabel_confusion_matrix`), `multi_label_scores` (per-label
  `precision_recall_fscore_support`, `f1_score(average="micro"/"macro")`, `accuracy_score`:
  the subset accuracy).
- NER: `conll_entity_scores`, the entity-level precision, recall and F1 of conlleval.pl (and of
  seqeval's default, non-strict mode), overall (micro) and per entity type.

`weights` is the eval records' `is_real_example`: the tasks pad their eval records to a multiple
of the batch size with padding examples (weight 0) so that fixed-size batches see every real
example once; those rows must not count. Weights other than 0 and 1 are rejected rather than read
as sample weights, because rank correlations have no agreed weighted form and a fractional
weight here would be a bug upstream.

Degenerate inputs give the oracles' values where those are numbers: F1 and precision/recall are
0 when their denominator is 0 (scikit-learn's and conlleval's zero_division), Matthews 0 when
either side is constant (scikit-learn); Pearson and Spearman are NaN when either side is
constant (scipy, which also warns).
"""
import collections

import numpy as np

# ---------------------------------------------------------------------------------------------
# Per-example metrics (GLUE)
# ---------------------------------------------------------------------------------------------


def _real_rows(weights, *columns):
    """The 1-D `columns` restricted to the rows whose weight is 1 (all rows when weights is None).

    Checks what every metric needs: equal lengths, 0/1 weights, at least one real row.
    """
    columns = [np.asarray(column) for column in columns]
    if any(column.ndim != 1 or len(column) != len(columns[0]) for column in columns):
        raise ValueError(f"expected 1-D arrays of one length, got shapes "
                         f"{[c.shape for c in columns]}")
    length = len(columns[0])
    if weights is not None:
        weights = np.asarray(weights)
        if weights.shape != (length,):
            raise ValueError(f"weights have shape {weights.shape}, expected ({length},)")
        if not np.all((weights == 0) | (weights == 1)):
            raise ValueError("weights must be 0 (padding example) or 1 (real example), as "
                             "is_real_example")
        keep = weights == 1
        columns = [column[keep] for column in columns]
    if len(columns[0]) == 0:
        raise ValueError("no real examples to score")
    return columns


def _ratio(numerator, denominator):
    """numerator / denominator, 0 when the denominator is 0 (the oracles' zero_division)."""
    return float(numerator) / float(denominator) if denominator else 0.0


def _f1(precision, recall):
    return _ratio(2 * precision * recall, precision + recall)


def accuracy(labels, predictions, weights=None):
    """Fraction of real examples whose prediction equals the label (accuracy_score)."""
    labels, predictions = _real_rows(weights, labels, predictions)
    return float(np.mean(labels == predictions))


def f1_binary(labels, predictions, weights=None):
    """F1 of the positive class 1 (f1_score(average="binary")), as GLUE reports for MRPC, QQP.

    Labels and predictions must be 0 or 1: another value would mean a multi-class task scored
    with a binary metric.
    """
    labels, predictions = _real_rows(weights, labels, predictions)
    for name, values in (("labels", labels), ("predictions", predictions)):
        if not np.all((values == 0) | (values == 1)):
            raise ValueError(f"f1_binary: {name} must be 0 or 1, got {np.unique(values)}")
    true_positives = np.sum((labels == 1) & (predictions == 1))
    false_positives = np.sum((labels != 1) & (predictions == 1))
    false_negatives = np.sum((labels == 1) & (predictions != 1))
    return _ratio(2 * true_positives, 2 * true_positives + false_positives + false_negatives)


def matthews_corrcoef(labels, predictions, weights=None):
    """Matthews correlation coefficient, binary or multi-class (GLUE's CoLA metric).

    scikit-learn's multi-class form (Gorodkin's R_K) from the confusion matrix; 0 when the labels
    or the predictions are all one class.
    """
    labels, predictions = _real_rows(weights, labels, predictions)
    classes, codes = np.unique(np.concatenate([labels, predictions]), return_inverse=True)
    true_codes, predicted_codes = codes[:len(labels)], codes[len(labels):]
    confusion = np.zeros((len(classes), len(classes)), dtype=np.float64)
    np.add.at(confusion, (true_codes, predicted_codes), 1)
    true_totals, predicted_totals = confusion.sum(axis=1), confusion.sum(axis=0)
    num_correct, num_samples = np.trace(confusion), confusion.sum()
    covariance_true_predicted = num_correct * num_samples - true_totals @ predicted_totals
    covariance_predicted = num_samples ** 2 - predicted_totals @ predicted_totals
    covariance_true = num_samples ** 2 - true_totals @ true_totals
    if covariance_predicted * covariance_true == 0:
        return 0.0
    return float(covariance_true_predicted / np.sqrt(covariance_true * covariance_predicted))


def _pearson_of(x, y):
    """Pearson's r of two float64 vectors, as scipy computes it (centred, then normalised)."""
    if len(x) < 2:
        raise ValueError("a correlation needs at least 2 real examples")
    x_centred, y_centred = x - x.mean(), y - y.mean()
    x_norm, y_norm = np.linalg.norm(x_centred), np.linalg.norm(y_centred)
    if x_norm == 0 or y_norm == 0:
        return float("nan")
    return float(np.clip((x_centred / x_norm) @ (y_centred / y_norm), -1.0, 1.0))


def average_ranks(values):
    """1-based ranks, ties sharing the mean of their ranks (scipy.stats.rankdata "average")."""
    values = np.asarray(values)
    order = np.argsort(values, kind="mergesort")
    sorted_values = values[order]
    starts_group = np.r_[True, sorted_values[1:] != sorted_values[:-1]]
    group_of_sorted = np.cumsum(starts_group) - 1
    group_bounds = np.r_[np.flatnonzero(starts_group), len(values)]
    # Group g holds sorted positions group_bounds[g] .. group_bounds[g + 1] - 1, so its ranks
    # average to their midpoint plus 1.
    group_ranks = 0.5 * (group_bounds[:-1] + group_bounds[1:] - 1) + 1
    ranks = np.empty(len(values), dtype=np.float64)
    ranks[order] = group_ranks[group_of_sorted]
    return ranks


def pearson(x, y, weights=None):
    """Pearson correlation of real examples (scipy.stats.pearsonr's statistic), STS-B's first
    metric."""
    x, y = _real_rows(weights, x, y)
    return _pearson_of(x.astype(np.float64), y.astype(np.float64))


def spearman(x, y, weights=None):
    """Spearman rank correlation of real examples, ties at their average rank
    (scipy.stats.spearmanr), STS-B's second metric."""
    x, y = _real_rows(weights, x, y)
    return _pearson_of(average_ranks(x), average_ranks(y))


def _ratios(numerators, denominators):
    """Element-wise numerators / denominators, 0 where a denominator is 0 (as `_ratio`)."""
    numerators = np.asarray(numerators, np.float64)
    denominators = np.asarray(denominators, np.float64)
    return np.divide(numerators, denominators, out=np.zeros_like(numerators),
                     where=denominators != 0)


def _class_ids(name, values, num_classes):
    if values.size and (not np.issubdtype(values.dtype, np.integer) or values.min() < 0
                        or values.max() >= num_classes):
        raise ValueError(f"{name} must be class ids in [0, {num_classes}), got "
                         f"{np.unique(values)}")
    return values


def confusion_matrix(labels, predictions, num_classes, weights=None):
    """[num_classes, num_classes] int64 counts of the real examples: row = true class, column
    = predicted class (scikit-learn's `confusion_matrix(labels=range(num_classes))`)."""
    labels, predictions = _real_rows(weights, labels, predictions)
    matrix = np.zeros((num_classes, num_classes), dtype=np.int64)
    np.add.at(matrix, (_class_ids("labels", labels, num_classes),
                       _class_ids("predictions", predictions, num_classes)), 1)
    return matrix


def scores_from_counts(true_positives, num_predicted, num_true):
    """{"precision", "recall", "f1"}: float64 arrays from per-class counts, 0 where a
    denominator is 0 (scikit-learn's zero_division=0)."""
    true_positives = np.asarray(true_positives, np.float64)
    precision = _ratios(true_positives, num_predicted)
    recall = _ratios(true_positives, num_true)
    return {"precision": precision, "recall": recall,
            "f1": _ratios(2 * precision * recall, precision + recall)}


def per_class_scores(labels, predictions, num_classes, weights=None):
    """Precision, recall and F1 of each class 0 .. num_classes - 1 over the real examples, and
    its support (true examples): {"precision", "recall", "f1", "support"}, arrays
    [num_classes] (scikit-learn's `precision_recall_fscore_support(labels=range(num_classes),
    zero_division=0)`; a class never predicted has precision 0, never true recall 0)."""
    matrix = confusion_matrix(labels, predictions, num_classes, weights)
    return dict(scores_from_counts(np.diag(matrix), matrix.sum(axis=0), matrix.sum(axis=1)),
                support=matrix.sum(axis=1))


def multi_label_counts(labels, predictions, weights=None):
    """Per label, over the real examples of multi-hot [N, num_labels] `labels` and
    `predictions`: {"true_positives", "false_positives", "false_negatives",
    "true_negatives"}, int64 arrays [num_labels] (scikit-learn's
    `multilabel_confusion_matrix`)."""
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    if labels.ndim != 2 or labels.shape != predictions.shape:
        raise ValueError(f"expected multi-hot arrays of one shape [examples, labels], got "
                         f"shapes {labels.shape} and {predictions.shape}")
    for name, values in (("labels", labels), ("predictions", predictions)):
        if not np.all((values == 0) | (values == 1)):
            raise ValueError(f"{name} must be multi-hot (0 or 1), got {np.unique(values)}")
    (real,) = _real_rows(weights, np.arange(len(labels)))
    true, predicted = labels[real] == 1, predictions[real] == 1
    return {"true_positives": np.sum(true & predicted, axis=0),
            "false_positives": np.sum(~true & predicted, axis=0),
            "false_negatives": np.sum(true & ~predicted, axis=0),
            "true_negatives": np.sum(~true & ~predicted, axis=0)}


def multi_label_scores(labels, predictions, weights=None):
    """Multi-label scores of the real examples of multi-hot [N, num_labels] arrays:
    "precision", "recall", "f1", "support" per label (arrays [num_labels]); "micro_precision",
    "micro_recall", "micro_f1" (every label's counts summed); "macro_f1" (the mean of the
    labels' F1, a label never true nor predicted counting 0, as scikit-learn with
    zero_division=0); "subset_accuracy" (the fraction of examples whose every label is
    right)."""
    counts = multi_label_counts(labels, predictions, weights)
    true_positives = counts["true_positives"]
    num_predicted = true_positives + counts["false_positives"]
    num_true = true_positives + counts["false_negatives"]
    per_label = scores_from_counts(true_positives, num_predicted, num_true)
    micro = scores_from_counts(true_positives.sum(), num_predicted.sum(), num_true.sum())
    (real,) = _real_rows(weights, np.arange(len(labels)))
    exact = np.all(np.asarray(labels)[real] == np.asarray(predictions)[real], axis=1)
    return dict(per_label, support=num_true,
                **{f"micro_{name}": float(value) for name, value in micro.items()},
                macro_f1=float(np.mean(per_label["f1"])), subset_accuracy=float(np.mean(exact)))


# ---------------------------------------------------------------------------------------------
# Entity-level scores (CoNLL NER)
# ---------------------------------------------------------------------------------------------

# The tag prefixes each scheme may use. conlleval's rules decode IOB1 and IOB2 the same way, so
# for them the scheme only says which prefixes are valid: an E- or S- tag under IOB1/IOB2 means
# IOBES labels scored as IOB, which would silently give wrong entities.
TAG_PREFIXES = {"IOB1": "BIO", "IOB2": "BIO", "IOBES": "BIOES"}

_OUTSIDE = ("O", "")  # (prefix, type) of "O", and of the boundary between sentences


def _split_tag(tag, scheme, where):
    """(prefix, entity type) of a tag: "B-PER" -> ("B", "PER"), "O" -> ("O", "")."""
    if tag == "O":
        return _OUTSIDE
    prefix, dash, entity_type = str(tag).partition("-")
    if not dash or prefix not in TAG_PREFIXES[scheme] or prefix == "O":
        valid = ", ".join(f"{p}-TYPE" for p in TAG_PREFIXES[scheme] if p != "O")
        hint = " (IOBES tags: pass scheme=\"IOBES\")" if prefix in ("E", "S") else ""
        raise ValueError(f"{where}: tag {tag!r} is not valid under scheme {scheme} "
                         f"(expected O, {valid}){hint}")
    return prefix, entity_type


def _chunk_ends(previous, current):
    """conlleval.pl's endOfChunk: does a chunk end at `previous` (before `current`)?

    With seqeval's additions for IOBES (a chunk always ends after E- and S-); on B/I/O tags these
    are exactly conlleval's rules.
    """
    (previous_prefix, previous_type), (prefix, entity_type) = previous, current
    if previous_prefix in "ES":
        return True
    if previous_prefix in "BI" and prefix in "BSO":
        return True
    return previous_prefix != "O" and previous_type != entity_type


def _chunk_starts(previous, current):
    """conlleval.pl's startOfChunk: does a chunk start at `current`?

    Lenient as conlleval: an I- after O or after another type starts a chunk (IOB1's normal
    case, and a model's invalid IOB2 output); seqeval's additions for E- and S- as above.
    """
    (previous_prefix, previous_type), (prefix, entity_type) = previous, current
    if prefix in "BS":
        return True
    if previous_prefix in "OES" and prefix in "IE":
        return True
    return prefix != "O" and previous_type != entity_type


def entity_chunks(tag_sequences, scheme="IOB2", what="tags"):
    """The set of (entity type, sentence index, first word, last word) chunks of the sentences.

    Each sentence is closed by an O, as conlleval closes chunks at the blank line between
    sentences, so no chunk spans two sentences.
    """
    if scheme not in TAG_PREFIXES:
        raise ValueError(f"scheme must be one of {sorted(TAG_PREFIXES)}, got {scheme!r}")
    chunks = set()
    for sentence_index, tags in enumerate(tag_sequences):
        previous, start = _OUTSIDE, 0
        split_tags = [_split_tag(tag, scheme, f"{what}[{sentence_index}][{i}]")
                      for i, tag in enumerate(tags)]
        for position, current in enumerate(split_tags + [_OUTSIDE]):
            if _chunk_ends(previous, current):
                chunks.add((previous[1], sentence_index, start, position - 1))
            if _chunk_starts(previous, current):
                start = position
            previous = current
    return chunks


def _scores(num_correct, num_predicted, num_true):
    precision, recall = _ratio(num_correct, num_predicted), _ratio(num_correct, num_true)
    return {"precision": precision, "recall": recall, "f1": _f1(precision, recall)}


def conll_entity_scores(true_tag_sequences, predicted_tag_sequences, scheme="IOB2"):
    """Entity precision, recall and F1 of predicted tags against the true ones, as conlleval.

    A predicted entity counts as correct when a true entity has the same type, first word and
    last word. Chunks are read with conlleval.pl's start/end rules, which accept IOB1 and IOB2
    (and invalid sequences a model may output, such as O I-PER) alike; seqeval's default mode
    uses the same rules. scheme "IOBES" also accepts E- and S- tags (seqeval's rules for them).

    Returns {"precision", "recall", "f1": overall micro values over all entities (fractions,
    where conlleval prints percentages), "per_type": {type: {"precision", "recall", "f1",
    "support"}}} for every type found in either side; support is the number of true entities.
    """
    true_tag_sequences = list(true_tag_sequences)
    predicted_tag_sequences = list(predicted_tag_sequences)
    if len(true_tag_sequences) != len(predicted_tag_sequences):
        raise ValueError(f"{len(true_tag_sequences)} true sentences but "
                         f"{len(predicted_tag_sequences)} predicted")
    for index, (true_tags, predicted_tags) in enumerate(
            zip(true_tag_sequences, predicted_tag_sequences)):
        if len(true_tags) != len(predicted_tags):
            raise ValueError(f"sentence {index}: {len(true_tags)} true tags but "
                             f"{len(predicted_tags)} predicted")
    true_chunks = entity_chunks(true_tag_sequences, scheme, "true_tag_sequences")
    predicted_chunks = entity_chunks(predicted_tag_sequences, scheme, "predicted_tag_sequences")
    correct_chunks = true_chunks & predicted_chunks

    def count_by_type(chunks):
        return collections.Counter(chunk[0] for chunk in chunks)

    true_by_type, predicted_by_type = count_by_type(true_chunks), count_by_type(predicted_chunks)
    correct_by_type = count_by_type(correct_chunks)
    per_type = {
        entity_type: dict(_scores(correct_by_type[entity_type], predicted_by_type[entity_type],
                                  true_by_type[entity_type]),
                          support=true_by_type[entity_type])
        for entity_type in sorted(set(true_by_type) | set(predicted_by_type))}
    overall = _scores(len(correct_chunks), len(predicted_chunks), len(true_chunks))
    return dict(overall, per_type=per_type)
