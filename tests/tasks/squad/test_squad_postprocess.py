"""bert_tf.tasks.squad.postprocess against the original run_squad's write_predictions.

Oracle: the reference release's `write_predictions` (and `_get_best_indexes`,
`get_final_text`), given the reference's own examples and features of slices of the SQuAD dev
files and the same logits as ours (seeded random float32 logits, and the same rounded to one
decimal so that many logits tie); its absl FLAGS version_2_with_negative,
null_score_diff_threshold and verbose_logging set per case. The three files must be equal
byte for byte. The whole dev v1.1 set is compared (and timed) by
bench/finetuning/squad_postprocess.py.
"""
import json
import math

import numpy as np
import pytest

from bert_tf.tasks.squad import postprocess as sp
from bert_tf.tasks.squad import preprocessor as sd
from bert_tf.tokenization import FullTokenizer


@pytest.fixture(scope="module")
def tokenizer(uncased_vocab):
    return FullTokenizer(str(uncased_vocab), do_lower_case=True)


def dev_slice(shared_data, version, article_step):
    """The first paragraph and the longest one of every `article_step`-th article."""
    data = json.loads((shared_data / "SQuAD" / f"dev-v{version}.json").read_text("utf-8"))
    articles = []
    for article in data["data"][::article_step]:
        longest = max(article["paragraphs"], key=lambda p: len(p["context"]))
        kept = article["paragraphs"][:1]
        kept += [longest] if longest is not kept[0] else []
        articles.append(dict(article, paragraphs=kept))
    return {"data": articles}


@pytest.fixture(scope="module")
def slices(rs, shared_data, tokenizer, tmp_path_factory):
    """{version: (examples, features)} on dev slices, ours, for prediction with windows of
    max_seq_length 192 / doc_stride 64 / max_query_length 32 (several windows per long
    paragraph, so max-context decides)."""
    out = {}
    for version, step in (("1.1", 5), ("2.0", 4)):
        path = tmp_path_factory.mktemp("squad") / "dev.json"
        path.write_text(json.dumps(dev_slice(shared_data, version, step)), encoding="utf-8")
        examples = sd.read_squad_examples(str(path), is_training=False)
        features = sd.convert_examples_to_features(examples, tokenizer, 192, 64, 32, False)
        out[version] = (examples, features)
    return out


def logits_for(features, seed, ties, width=192):
    rng = np.random.default_rng(seed)
    starts = rng.normal(scale=3.0, size=(len(features), width)).astype(np.float32)
    ends = rng.normal(scale=3.0, size=(len(features), width)).astype(np.float32)
    # Padding low, as a trained model has it (with no valid span at all in a question's
    # windows, the original's SQuAD 2.0 code fails: see test_null_only_question_...).
    for row, feature in enumerate(features):
        starts[row, len(feature.tokens):] -= 30.0
        ends[row, len(feature.tokens):] -= 30.0
    # [CLS] logits high for every window of a third of the questions: the null answer wins
    # there (it takes the smallest over the windows).
    starts[:, 0] += np.array([25.0 * (f.example_index % 3 == 0) for f in features], np.float32)
    if ties:
        starts, ends = np.round(starts, 1), np.round(ends, 1)
    unique_ids = np.array([f.unique_id for f in features])
    order = rng.permutation(len(features))  # results need not come in feature order
    return unique_ids[order], starts[order], ends[order]


def reference_files(rs, examples, features, unique_ids, starts, ends, n_best, max_len, out):
    results = [rs.RawResult(unique_id=int(u), start_logits=[float(x) for x in s],
                            end_logits=[float(x) for x in e])
               for u, s, e in zip(unique_ids, starts, ends)]
    paths = [str(out / n) for n in (sp.PREDICTIONS_FILE, sp.NBEST_FILE, sp.NULL_ODDS_FILE)]
    rs.write_predictions(examples, features, results, n_best, max_len, True, *paths)
    return paths


CASES = [  # (version, seed, ties, n_best_size, max_answer_length, null_score_diff_threshold)
    ("1.1", 1, False, 20, 30, 0.0),
    ("1.1", 2, True, 20, 30, 0.0),
    ("1.1", 3, True, 5, 4, 0.0),
    ("2.0", 4, False, 20, 30, 0.0),
    ("2.0", 5, True, 20, 30, -1.5),
    ("2.0", 6, True, 12, 15, 2.0),
]


@pytest.mark.parametrize("version,seed,ties,n_best,max_len,threshold", CASES,
                         ids=[f"v{c[0]}-seed{c[1]}{'-ties' if c[2] else ''}" for c in CASES])
def test_prediction_files_equal_reference(rs, ref_flags, slices, tmp_path, version, seed, ties,
                                          n_best, max_len, threshold):
    v2 = version == "2.0"
    ref_flags(version_2_with_negative=v2, null_score_diff_threshold=threshold,
              verbose_logging=False)
    examples, features = slices[version]
    unique_ids, starts, ends = logits_for(features, seed, ties)
    (tmp_path / "ref").mkdir()
    (tmp_path / "ours").mkdir()
    ref_paths = reference_files(rs, examples, features, unique_ids, starts, ends, n_best,
                                max_len, tmp_path / "ref")
    our_paths = [str(tmp_path / "ours" / p.rsplit("/", 1)[1]) for p in ref_paths]
    predictions, nbest, null_odds = sp.write_predictions(
        examples, features, unique_ids, starts, ends, n_best, max_len, True, *our_paths,
        version_2_with_negative=v2, null_score_diff_threshold=threshold)
    for ref_path, our_path in zip(ref_paths[:3 if v2 else 2], our_paths):
        with open(ref_path, "rb") as a, open(our_path, "rb") as b:
            assert b.read() == a.read(), our_path
    assert len(predictions) == len(examples)
    if v2:  # the threshold decides some both ways
        assert "" in predictions.values() and set(predictions.values()) != {""}
        assert len(null_odds) == len(examples)
    else:
        assert not (tmp_path / "ours" / sp.NULL_ODDS_FILE).exists()
    if ties:  # ties did happen among the top logits
        top = np.sort(starts, axis=1)[:, -n_best:]
        assert (np.diff(top, axis=1) == 0).any()


def test_best_indexes_equal_the_stable_sort(rs):
    rng = np.random.default_rng(0)
    for width, n_best in ((384, 20), (50, 20), (20, 20), (10, 20), (64, 1), (7, 0)):
        for logits in (rng.normal(size=(40, width)),
                       rng.integers(-3, 3, size=(40, width)).astype(np.float64),
                       np.zeros((3, width)),
                       np.where(rng.random((40, width)) < 0.5, -0.0, 0.0)):
            ours = sp.best_indexes(logits, n_best)
            expected = [rs._get_best_indexes(row.tolist(), n_best) for row in logits]
            assert ours.tolist() == expected, (width, n_best)


def test_get_final_text_equals_reference(rs, ref_flags, slices):
    """get_final_text on de-tokenized spans of real contexts, cased and uncased, plus texts
    where the alignment fails, with the reference's verbose log lines counted alike."""
    ref_flags(verbose_logging=False)
    examples, features = slices["1.1"]
    rng = np.random.default_rng(3)
    pairs = [("steve smith", "Steve Smith's"), ("", "abc"), ("x", ""), ("a b", "a  b"),
             ("cafe", "Café."), ("1895", "(1895-1943)."), ("ab", "a b"), ("##", "##")]
    for feature in features[:60]:
        context = sorted(feature.token_to_orig_map)
        for _ in range(8):
            i = int(rng.integers(len(context)))
            j = min(len(context) - 1, i + int(rng.integers(6)))
            start, end = context[i], context[j]
            tok_text = " ".join(feature.tokens[start:end + 1]).replace(" ##", "")
            tok_text = " ".join(tok_text.replace("##", "").split())
            words = examples[feature.example_index].doc_tokens
            orig = " ".join(words[feature.token_to_orig_map[start]:
                                  feature.token_to_orig_map[end] + 1])
            pairs.append((tok_text, orig))
            pairs.append((tok_text[1:], orig))  # starts inside a word
    for do_lower_case in (True, False):
        for pred, orig in pairs:
            assert sp.get_final_text(pred, orig, do_lower_case) == rs.get_final_text(
                pred, orig, do_lower_case), (pred, orig)


def test_null_only_question_predicts_empty(tokenizer):
    """SQuAD 2.0 with no valid span in any window (the original fails there)."""
    example = sd.SquadExample("q", "what is it?", ["just", "a", "few", "words"])
    features = sd.convert_examples_to_features([example], tokenizer, 16, 4, 8, False)
    width = 16
    starts = np.zeros((len(features), width), np.float32)
    ends = np.zeros((len(features), width), np.float32)
    starts[:, 1] = ends[:, 1] = 5.0  # the best position is in the question
    starts[:, 0], ends[:, 0] = 1.0, 0.5
    ids = [f.unique_id for f in features]
    predictions, nbest, null_odds = sp.compute_predictions(
        [example], features, ids, starts, ends, 1, 30, True, version_2_with_negative=True)
    assert predictions == {"q": ""}
    assert null_odds == {"q": 1.5}
    assert [e["text"] for e in nbest["q"]] == [""]


def test_missing_logits_are_an_error(tokenizer):
    example = sd.SquadExample("q", "what?", ["some", "words"])
    features = sd.convert_examples_to_features([example], tokenizer, 16, 4, 8, False)
    with pytest.raises(ValueError, match=r"no logits for 1 of 1 features \(unique_id "
                                         r"1000000000 first\)"):
        sp.compute_predictions([example], features, [7], np.zeros((1, 16)), np.zeros((1, 16)),
                               20, 30, True)


@pytest.mark.parametrize("obj", [
    {"a": "x", "b\u00e9\n\"": "\u4e2d\u6587 \u2028"},
    {"q": 1.5, "r": -0.0, "s": 1e300, "t": float("nan"), "u": float("inf"), "v": 0,
     "w": 1000000, "x": True, "y": None},
    {"q": [{"text": "a\tb", "probability": 0.25, "start_logit": 0, "end_logit": -1.25}],
     "r": [{"text": "", "probability": 1.0, "start_logit": float("-inf"), "end_logit": 2.0},
           {"text": "empty", "probability": 5e-324, "start_logit": 0.0, "end_logit": 0.0}]},
    {"q": [{"other": 1, "keys": [1]}]},  # not flat: the standard encoder
    {"q": []}, {}, {"q": [{}]}, {1: "x"}, [1, 2],
])
def test_prediction_json_is_json_dumps_indent4(obj):
    assert sp._dumps_indent4(obj) == json.dumps(obj, indent=4) + "\n"


def test_compute_softmax_is_the_original(rs):
    for scores in ([], [1.0], [3.2, 1.0, -7.5, 3.2], [1000.0, -1000.0]):
        assert sp._compute_softmax(scores) == rs._compute_softmax(scores)
    assert math.isclose(sum(sp._compute_softmax([0.1, 0.2, 0.3])), 1.0)
