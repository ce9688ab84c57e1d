"""bert_tf.tasks.metrics against the usual oracles.

GLUE metrics: scikit-learn (accuracy_score, f1_score, matthews_corrcoef) and scipy.stats
(pearsonr, spearmanr, rankdata) on random data with ties; weighted = the oracle on the rows of
weight 1 (padding examples dropped).
Entity scores: seqeval (default, conlleval-compatible mode) on the CoNLL-2003 validation set's
real tag sequences, against gold and against deterministic corruptions of it (types flipped,
B- dropped, boundaries shifted, random tags that make invalid sequences), as IOB2, converted to
IOB1, and converted to IOBES.
"""
import warnings

import numpy as np
import pytest

from bert_tf.tasks import metrics
from bert_tf.tasks.ner import reader

from conftest import require_module

# ---------------------------------------------------------------------------------------------
# GLUE metrics
# ---------------------------------------------------------------------------------------------


def _random_weights(rng, size):
    """is_real_example-like weights: mostly 1, a tail of padding and a few zeros inside."""
    weights = (rng.random(size) > 0.1).astype(np.int64)
    weights[-max(1, size // 10):] = 0
    weights[:2] = 1  # a correlation needs two real rows
    return weights


def _classification_cases():
    """(name, labels, predictions, weights) with binary and 3-class labels, and degenerate
    cases whose oracles hit a zero denominator."""
    rng = np.random.default_rng(20261122)
    cases = []
    for num_classes in (2, 3):
        for size in (7, 200, 1000):
            labels = rng.integers(0, num_classes, size)
            # Predictions right about 70% of the time, so the scores are neither 0 nor 1.
            predictions = np.where(rng.random(size) < 0.7, labels,
                                   rng.integers(0, num_classes, size))
            cases.append((f"{num_classes}-class n={size}", labels, predictions,
                          _random_weights(rng, size)))
    labels = rng.integers(0, 2, 50)
    cases.append(("all predicted 0", labels, np.zeros(50, np.int64), None))
    cases.append(("constant labels", np.ones(50, np.int64), labels, None))
    cases.append(("no positives", np.zeros(50, np.int64), np.zeros(50, np.int64), None))
    return cases


CLASSIFICATION_CASES = _classification_cases()


def _real(weights, *columns):
    """The oracle's view: the rows of weight 1."""
    if weights is None:
        return columns
    return [np.asarray(column)[np.asarray(weights) == 1] for column in columns]


@pytest.mark.filterwarnings("ignore:A single label was found")  # sklearn, "no positives"
@pytest.mark.parametrize("name, labels, predictions, weights", CLASSIFICATION_CASES,
                         ids=[case[0] for case in CLASSIFICATION_CASES])
def test_classification_metrics_match_sklearn(name, labels, predictions, weights):
    sklearn_metrics = require_module("sklearn.metrics", "oracle of the GLUE metrics")
    real_labels, real_predictions = _real(weights, labels, predictions)
    assert metrics.accuracy(labels, predictions, weights) == pytest.approx(
        sklearn_metrics.accuracy_score(real_labels, real_predictions), abs=1e-15)
    assert metrics.matthews_corrcoef(labels, predictions, weights) == pytest.approx(
        sklearn_metrics.matthews_corrcoef(real_labels, real_predictions), abs=1e-12)
    if set(np.unique(labels)) | set(np.unique(predictions)) <= {0, 1}:
        assert metrics.f1_binary(labels, predictions, weights) == pytest.approx(
            sklearn_metrics.f1_score(real_labels, real_predictions, zero_division=0),
            abs=1e-15)


@pytest.mark.parametrize("name, labels, predictions, weights", CLASSIFICATION_CASES,
                         ids=[case[0] for case in CLASSIFICATION_CASES])
def test_per_class_scores_and_confusion_matrix_match_sklearn(name, labels, predictions,
                                                             weights):
    """Every class listed, one that never occurs (the last) included: its scores are 0."""
    sklearn_metrics = require_module("sklearn.metrics", "oracle of the per-class metrics")
    num_classes = int(max(labels.max(), predictions.max())) + 2
    classes = list(range(num_classes))
    real_labels, real_predictions = _real(weights, labels, predictions)
    scores = metrics.per_class_scores(labels, predictions, num_classes, weights)
    expected = sklearn_metrics.precision_recall_fscore_support(
        real_labels, real_predictions, labels=classes, zero_division=0)
    for name_, values in zip(("precision", "recall", "f1", "support"), expected):
        np.testing.assert_allclose(scores[name_], values, rtol=0, atol=1e-15, err_msg=name_)
    assert scores["f1"][-1] == 0 and scores["support"][-1] == 0
    np.testing.assert_array_equal(
        metrics.confusion_matrix(labels, predictions, num_classes, weights),
        sklearn_metrics.confusion_matrix(real_labels, real_predictions, labels=classes))


def _multi_label_cases():
    """(name, labels, predictions, weights): multi-hot [N, L] with labels of different
    frequencies (one never true nor predicted in the last case) and predictions that flip
    about 20% of the entries."""
    rng = np.random.default_rng(11)
    cases = []
    for size, num_labels in ((9, 2), (300, 5), (1000, 7)):
        labels = (rng.random((size, num_labels)) < np.linspace(0.1, 0.6, num_labels)).astype(int)
        predictions = np.where(rng.random((size, num_labels)) < 0.2, 1 - labels, labels)
        cases.append((f"n={size} labels={num_labels}", labels, predictions,
                      _random_weights(rng, size)))
    labels = (rng.random((50, 4)) < 0.4).astype(int)
    labels[:, 2] = 0
    predictions = labels.copy()
    predictions[:, 0] = 1 - predictions[:, 0]
    cases.append(("label never true nor predicted", labels, predictions, None))
    return cases


MULTI_LABEL_CASES = _multi_label_cases()


@pytest.mark.parametrize("name, labels, predictions, weights", MULTI_LABEL_CASES,
                         ids=[case[0] for case in MULTI_LABEL_CASES])
def test_multi_label_scores_match_sklearn(name, labels, predictions, weights):
    sklearn_metrics = require_module("sklearn.metrics", "oracle of the multi-label metrics")
    real_labels, real_predictions = _real(weights, labels, predictions)
    scores = metrics.multi_label_scores(labels, predictions, weights)
    expected = sklearn_metrics.precision_recall_fscore_support(
        real_labels, real_predictions, average=None, zero_division=0)
    for name_, values in zip(("precision", "recall", "f1", "support"), expected):
        np.testing.assert_allclose(scores[name_], values, rtol=0, atol=1e-15, err_msg=name_)
    for average in ("micro", "macro"):
        assert scores[f"{average}_f1"] == pytest.approx(sklearn_metrics.f1_score(
            real_labels, real_predictions, average=average, zero_division=0), abs=1e-15)
    assert scores["micro_precision"] == pytest.approx(sklearn_metrics.precision_score(
        real_labels, real_predictions, average="micro", zero_division=0), abs=1e-15)
    assert scores["micro_recall"] == pytest.approx(sklearn_metrics.recall_score(
        real_labels, real_predictions, average="micro", zero_division=0), abs=1e-15)
    assert scores["subset_accuracy"] == pytest.approx(
        sklearn_metrics.accuracy_score(real_labels, real_predictions), abs=1e-15)
    counts = metrics.multi_label_counts(labels, predictions, weights)
    matrices = sklearn_metrics.multilabel_confusion_matrix(real_labels, real_predictions)
    np.testing.assert_array_equal(counts["true_negatives"], matrices[:, 0, 0])
    np.testing.assert_array_equal(counts["false_positives"], matrices[:, 0, 1])
    np.testing.assert_array_equal(counts["false_negatives"], matrices[:, 1, 0])
    np.testing.assert_array_equal(counts["true_positives"], matrices[:, 1, 1])


def test_matthews_on_string_and_unseen_classes():
    """Classes are whatever values occur (CoLA ids, strings), including predicted-only ones."""
    sklearn_metrics = require_module("sklearn.metrics", "oracle of the GLUE metrics")
    labels = np.array(["a", "b", "a", "c", "b", "a"])
    predictions = np.array(["a", "b", "d", "c", "a", "a"])
    assert metrics.matthews_corrcoef(labels, predictions) == pytest.approx(
        sklearn_metrics.matthews_corrcoef(labels, predictions), abs=1e-12)


def _correlation_cases():
    """(name, x, y, weights): STS-B-like scores on a 0.2 grid (many ties) against noisy
    predictions, integer ranks with ties on both sides, and continuous values."""
    rng = np.random.default_rng(7)
    cases = []
    for size in (3, 50, 1500):
        gold = np.round(rng.uniform(0, 5, size) * 5) / 5
        predicted = gold + rng.normal(0, 1, size)
        cases.append((f"sts-like n={size}", gold, predicted, _random_weights(rng, size)))
    x = rng.integers(0, 5, 300)
    cases.append(("integer ties both sides", x, (x + rng.integers(0, 3, 300)) % 6,
                  _random_weights(rng, 300)))
    cases.append(("continuous", rng.normal(size=400), rng.normal(size=400), None))
    cases.append(("float32 predictions", rng.uniform(0, 5, 200).astype(np.float32),
                  rng.uniform(0, 5, 200).astype(np.float32), None))
    return cases


CORRELATION_CASES = _correlation_cases()


@pytest.mark.parametrize("name, x, y, weights", CORRELATION_CASES,
                         ids=[case[0] for case in CORRELATION_CASES])
def test_correlations_match_scipy(name, x, y, weights):
    stats = require_module("scipy.stats", "oracle of the STS-B metrics")
    # In float64 for the oracle too: scipy computes float32 input in float32, we in float64.
    real_x, real_y = _real(weights, np.asarray(x, np.float64), np.asarray(y, np.float64))
    assert metrics.pearson(x, y, weights) == pytest.approx(
        stats.pearsonr(real_x, real_y).statistic, abs=1e-12)
    assert metrics.spearman(x, y, weights) == pytest.approx(
        stats.spearmanr(real_x, real_y).statistic, abs=1e-12)


def test_average_ranks_match_rankdata():
    stats = require_module("scipy.stats", "oracle of the STS-B metrics")
    rng = np.random.default_rng(3)
    for values in (rng.integers(0, 10, 500), np.round(rng.normal(size=100), 1), np.ones(4),
                   np.array([3.0])):
        np.testing.assert_array_equal(metrics.average_ranks(values), stats.rankdata(values))


def test_constant_inputs():
    """Pearson and Spearman are NaN (scipy), Matthews 0 (scikit-learn) on a constant side."""
    constant, varying = np.ones(10), np.arange(10.0)
    assert np.isnan(metrics.pearson(constant, varying))
    assert np.isnan(metrics.spearman(varying, constant))
    assert metrics.matthews_corrcoef(constant, varying) == 0.0


def test_padding_rows_are_ignored_whatever_they_hold():
    labels = np.array([1, 0, 1, 1, 0])
    predictions = np.array([1, 0, 0, 1, 0])
    weights = np.array([1, 1, 1, 0, 0])
    garbage = np.array([1, 0, 1, 0, 1])  # the padding rows changed
    for metric in (metrics.accuracy, metrics.f1_binary, metrics.matthews_corrcoef,
                   metrics.pearson, metrics.spearman):
        assert metric(labels, predictions, weights) == metric(
            labels, np.where(weights == 1, predictions, garbage), weights)
        assert metric(labels, predictions, weights) == metric(labels[:3], predictions[:3])


@pytest.mark.parametrize("call, message", [
    (lambda: metrics.accuracy([1, 0], [1, 0], [1, 0.5]), "must be 0 .* or 1"),
    (lambda: metrics.accuracy([1, 0], [1, 0], [1, 1, 1]), "weights have shape"),
    (lambda: metrics.accuracy([1, 0], [1, 0, 1]), "one length"),
    (lambda: metrics.accuracy([1, 0], [1, 0], [0, 0]), "no real examples"),
    (lambda: metrics.f1_binary([1, 2], [1, 0]), "labels must be 0 or 1"),
    (lambda: metrics.pearson([1.0], [2.0]), "at least 2"),
    (lambda: metrics.confusion_matrix([0, 2], [0, 1], 2), r"labels must be class ids in \[0, 2\)"),
    (lambda: metrics.per_class_scores([0, 1], [0.5, 1], 2), "predictions must be class ids"),
    (lambda: metrics.multi_label_scores([[1, 0]], [[1, 0, 0]]), "one shape"),
    (lambda: metrics.multi_label_scores([[1, 2]], [[1, 0]]), "labels must be multi-hot"),
    (lambda: metrics.multi_label_counts([[1, 0], [0, 1]], [[1, 0], [0, 1]], [1, 2]),
     "must be 0 .* or 1"),
])
def test_invalid_inputs(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# ---------------------------------------------------------------------------------------------
# Entity scores (conlleval / seqeval)
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gold_tags(shared_data):
    sentences = reader.read_conll(shared_data / "conll2003" / "valid.txt")
    return [tags for _, tags in sentences]


def _entity_type(tag):
    return tag.partition("-")[2]


def flip_types(tag_sequences):
    """Every 4th tagged word takes the next type (splitting entities mid-way), and every 7th
    entity start takes the previous type."""
    types = ["LOC", "MISC", "ORG", "PER"]
    result, count = [], 0
    for tags in tag_sequences:
        tags = list(tags)
        for i, tag in enumerate(tags):
            if tag == "O":
                continue
            count += 1
            shift = 1 if count % 4 == 0 else -1 if count % 7 == 0 and tag[0] == "B" else 0
            if shift:
                tags[i] = f"{tag[0]}-{types[(types.index(_entity_type(tag)) + shift) % 4]}"
        result.append(tags)
    return result


def drop_b(tag_sequences):
    """Every 2nd B- becomes I- (merging adjacent entities of one type, otherwise the same
    entity under the lenient rules), every 3rd becomes O (the entity loses its first word)."""
    result, count = [], 0
    for tags in tag_sequences:
        tags = list(tags)
        for i, tag in enumerate(tags):
            if tag.startswith("B-"):
                count += 1
                if count % 3 == 0:
                    tags[i] = "O"
                elif count % 2 == 0:
                    tags[i] = "I-" + _entity_type(tag)
        result.append(tags)
    return result


def shift_boundaries(tag_sequences):
    """Every 3rd entity end grows by the following O word; every 5th multi-word entity starts
    one word later."""
    result, ends, starts = [], 0, 0
    for tags in tag_sequences:
        tags = list(tags)
        for i in range(len(tags) - 1):
            tag, following = tags[i], tags[i + 1]
            if tag != "O" and following == "O":
                ends += 1
                if ends % 3 == 0:
                    tags[i + 1] = "I-" + _entity_type(tag)
            elif tag.startswith("B-") and following == "I-" + _entity_type(tag):
                starts += 1
                if starts % 5 == 0:
                    tags[i], tags[i + 1] = "O", "B-" + _entity_type(tag)
        result.append(tags)
    return result


def random_tags(tag_sequences, rate=0.08, seed=12345):
    """About `rate` of the words get a random tag: invalid sequences (O I-PER, B-LOC I-ORG)
    that only the lenient chunk rules decode."""
    rng = np.random.default_rng(seed)
    labels = sorted({tag for tags in tag_sequences for tag in tags})
    return [[labels[rng.integers(len(labels))] if rng.random() < rate else tag for tag in tags]
            for tags in tag_sequences]


def all_corruptions(tag_sequences):
    return random_tags(shift_boundaries(drop_b(flip_types(tag_sequences))))


CORRUPTIONS = {"gold": lambda tag_sequences: [list(tags) for tags in tag_sequences],
               "flip_types": flip_types, "drop_b": drop_b, "shift_boundaries": shift_boundaries,
               "random_tags": random_tags, "all": all_corruptions}


def to_iob1(tag_sequences):
    """IOB2 -> IOB1: B- only where the previous word is in an entity of the same type."""
    result = []
    for tags in tag_sequences:
        converted = []
        for i, tag in enumerate(tags):
            if tag.startswith("B-") and (i == 0 or tags[i - 1] == "O"
                                         or _entity_type(tags[i - 1]) != _entity_type(tag)):
                tag = "I-" + _entity_type(tag)
            converted.append(tag)
        result.append(converted)
    return result


def to_iobes(tag_sequences):
    """Valid IOB2 -> IOBES: the last word of an entity is E- (S- for a single word)."""
    result = []
    for tags in tag_sequences:
        converted = []
        for i, tag in enumerate(tags):
            following = tags[i + 1] if i + 1 < len(tags) else "O"
            continues = following == "I-" + _entity_type(tag)
            if tag.startswith("B-") and not continues:
                tag = "S-" + _entity_type(tag)
            elif tag.startswith("I-") and not continues:
                tag = "E-" + _entity_type(tag)
            converted.append(tag)
        result.append(converted)
    return result


def seqeval_scores(true_tag_sequences, predicted_tag_sequences):
    """seqeval's default-mode numbers in conll_entity_scores' layout."""
    seqeval = require_module("seqeval.metrics", "oracle of the CoNLL entity scores")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # UndefinedMetricWarning on a type never predicted
        report = seqeval.classification_report(true_tag_sequences, predicted_tag_sequences,
                                               output_dict=True, zero_division=0)
        overall = {name: function(true_tag_sequences, predicted_tag_sequences)
                   for name, function in (("precision", seqeval.precision_score),
                                          ("recall", seqeval.recall_score),
                                          ("f1", seqeval.f1_score))}
    per_type = {entity_type: {"precision": row["precision"], "recall": row["recall"],
                              "f1": row["f1-score"], "support": row["support"]}
                for entity_type, row in report.items() if not entity_type.endswith(" avg")}
    return dict(overall, per_type=per_type)


def assert_scores_equal(ours, oracle):
    assert set(ours) == set(oracle)
    for name in ("precision", "recall", "f1"):
        assert ours[name] == pytest.approx(oracle[name], abs=1e-12), name
    assert sorted(ours["per_type"]) == sorted(oracle["per_type"])
    for entity_type, row in oracle["per_type"].items():
        assert ours["per_type"][entity_type]["support"] == row["support"], entity_type
        for name in ("precision", "recall", "f1"):
            assert ours["per_type"][entity_type][name] == pytest.approx(row[name], abs=1e-12), \
                (entity_type, name)


@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
def test_entity_scores_match_seqeval(gold_tags, corruption):
    predicted = CORRUPTIONS[corruption](gold_tags)
    ours = metrics.conll_entity_scores(gold_tags, predicted)
    assert_scores_equal(ours, seqeval_scores(gold_tags, predicted))
    if corruption == "gold":
        assert ours["f1"] == 1.0
        # The development set's entities in the CoNLL-2003 paper (Tjong Kim Sang and De Meulder,
        # 2003, table 2): 5,942 in all.
        assert {t: row["support"] for t, row in ours["per_type"].items()} == {
            "LOC": 1837, "MISC": 922, "ORG": 1341, "PER": 1842}
    else:
        assert 0.1 < ours["f1"] < 0.99, "the corruption should change the score, not ruin it"


def test_iob1_scores_match_seqeval_and_iob2(gold_tags):
    """IOB1 tags (converted from IOB2, entities unchanged) score as seqeval scores them, and as
    the same entities written in IOB2."""
    predicted = all_corruptions(gold_tags)
    gold_iob1, predicted_iob1 = to_iob1(gold_tags), to_iob1(predicted)
    assert gold_iob1 != gold_tags and predicted_iob1 != predicted
    ours = metrics.conll_entity_scores(gold_iob1, predicted_iob1, scheme="IOB1")
    assert_scores_equal(ours, seqeval_scores(gold_iob1, predicted_iob1))
    assert ours == metrics.conll_entity_scores(gold_tags, predicted)
    assert ours["f1"] < 0.99


def test_iobes_scores_match_seqeval(gold_tags):
    """IOBES gold against IOBES predictions (valid ones from a corruption; seqeval's rules)."""
    gold_iobes = to_iobes(gold_tags)
    predicted_iobes = to_iobes(shift_boundaries(flip_types(gold_tags)))
    ours = metrics.conll_entity_scores(gold_iobes, predicted_iobes, scheme="IOBES")
    assert_scores_equal(ours, seqeval_scores(gold_iobes, predicted_iobes))
    assert ours == metrics.conll_entity_scores(gold_tags, shift_boundaries(flip_types(gold_tags)))


@pytest.mark.parametrize("true, predicted, expected_chunks", [
    # conlleval's lenient rules: I- after O starts an entity; a type change starts another.
    (["B-PER", "I-PER", "O"], ["I-PER", "I-PER", "O"], {("PER", 0, 0, 1)}),
    (["B-PER", "I-LOC"], ["B-PER", "B-LOC"], {("PER", 0, 0, 0), ("LOC", 0, 1, 1)}),
    (["B-PER", "B-PER"], ["B-PER", "B-PER"], {("PER", 0, 0, 0), ("PER", 0, 1, 1)}),
    (["I-ORG", "B-ORG", "I-ORG"], ["I-ORG", "B-ORG", "I-ORG"],
     {("ORG", 0, 0, 0), ("ORG", 0, 1, 2)}),
])
def test_lenient_chunk_rules(true, predicted, expected_chunks):
    assert metrics.entity_chunks([predicted]) == expected_chunks
    scores = metrics.conll_entity_scores([true], [predicted])
    assert scores["f1"] == 1.0


def test_entities_never_span_sentences():
    assert metrics.entity_chunks([["B-PER"], ["I-PER"]]) == {("PER", 0, 0, 0), ("PER", 1, 0, 0)}


def test_zero_divisions_are_zero():
    scores = metrics.conll_entity_scores([["B-PER", "O"]], [["O", "B-LOC"]])
    assert (scores["precision"], scores["recall"], scores["f1"]) == (0.0, 0.0, 0.0)
    assert scores["per_type"]["LOC"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0,
                                         "support": 0}
    nothing = metrics.conll_entity_scores([["O"]], [["O"]])
    assert (nothing["f1"], nothing["per_type"]) == (0.0, {})


@pytest.mark.parametrize("true, predicted, scheme, message", [
    ([["B-PER", "E-PER"]], [["B-PER", "E-PER"]], "IOB2", "not valid under scheme IOB2.*IOBES"),
    ([["S-PER"]], [["S-PER"]], "IOB1", "pass scheme=\"IOBES\""),
    ([["PER"]], [["O"]], "IOB2", r"true_tag_sequences\[0\]\[0\]: tag 'PER'"),
    ([["O", "O"]], [["O", "X-PER"]], "IOBES", r"predicted_tag_sequences\[0\]\[1\]"),
    ([["O", "O"]], [["O"]], "IOB2", "sentence 0: 2 true tags but 1 predicted"),
    ([["O"]], [["O"], ["O"]], "IOB2", "1 true sentences but 2 predicted"),
    ([["O"]], [["O"]], "BILOU", "scheme must be one of"),
])
def test_invalid_tags_are_rejected(true, predicted, scheme, message):
    with pytest.raises(ValueError, match=message):
        metrics.conll_entity_scores(true, predicted, scheme=scheme)
