"""bert_tf.tasks.squad.metrics: the official SQuAD v1.1 and v2.0 evaluation scripts' numbers.

Oracles:
- small cases worked out by hand from the official definitions (normalisation, exact match,
  token F1 and its empty-answer rules in each version, the no-answer threshold, the best
  threshold search);
- Hugging Face transformers' `squad_metrics.py` (a port of the v2.0 script's functions), when
  the transformers peer's venv of bench/envs/hf_env.sh exists (~/.cache/bert_tf/hf-venv, or
  $BERT_TF_HF_VENV): its functions on every 4th article of dev v2.0 and v1.1 with varied
  predictions.
  Without that venv the test skips naming the script (fails under CI=true, whose .ci/run
  makes it).

The official scripts' own text (not on this machine) gave the same dicts on both dev sets with
such predictions when checked during development.
"""
import glob
import json
import os
import pathlib
import random
import types

import pytest

from bert_tf.tasks.squad import metrics as m
from conftest import HF_VENV, require_hf_venv


def dataset(*questions, context="some context"):
    """A "data" list with one paragraph holding (id, [answer texts]) questions."""
    return [{"title": "t", "paragraphs": [{"context": context, "qas": [
        {"id": qid, "question": "?", "answers": [{"text": t, "answer_start": 0}
                                                 for t in answers]}
        for qid, answers in questions]}]}]


def test_normalize_answer():
    assert m.normalize_answer("The  Quick, brown fox!") == "quick brown fox"
    assert m.normalize_answer("an apple a day") == "apple day"
    assert m.normalize_answer("Theory of the U.S.") == "theory of us"  # articles as words only
    assert m.normalize_answer("  \u00c9COLE\tNormale ") == "\u00e9cole normale"
    assert m.normalize_answer("a") == "" and m.normalize_answer("...") == ""


def test_v1_scores_by_hand():
    assert m.exact_match_score("the Denver Broncos", "Denver Broncos!") is True
    # 2 shared tokens of 3 predicted and 2 gold: P 2/3, R 1, F1 0.8.
    assert m.f1_score("Denver Broncos team", "Denver Broncos") == pytest.approx(0.8)
    assert m.f1_score("", "the") == 0  # v1.1: no shared token, 0 even if both are empty
    data = dataset(("q1", ["Denver Broncos", "The Broncos"]), ("q2", ["1895"]),
                   ("q3", ["Paris"]))
    lines = []
    result = m.evaluate_v1(data, {"q1": "Broncos team", "q2": "1895"}, log=lines.append)
    # q1: EM 0; F1 max(P 1/2 R 1/2 -> 0.5, P 1/2 R 1 -> 2/3) = 2/3; q2: 1, 1; q3: 0, 0.
    assert result == {"exact_match": pytest.approx(100 / 3),
                      "f1": pytest.approx(100 * (2 / 3 + 1) / 3)}
    assert lines == ["Unanswered question q3 will receive score 0."]


def test_v1_question_without_answers_is_bad_input():
    """The official v1.1 script fails with max() of nothing; here an InputError names it."""
    from bert_tf.errors import InputError
    data = dataset(("q1", ["Paris"]), ("q2", []))
    with pytest.raises(InputError, match="question 'q2' has no answer: SQuAD 1.1 scoring"):
        m.evaluate_v1(data, {"q1": "Paris", "q2": "empty"})


def test_v2_scores_by_hand():
    assert m.compute_f1("", "") == 1 and m.compute_f1("the", "") == 1  # both empty
    assert m.compute_f1("Paris", "") == 0 and m.compute_exact("", "") == 1
    # h3's only answer "a" normalises to nothing: scored against "", yet it has answers.
    data = dataset(("h1", ["Paris", "the city of Paris"]), ("h2", ["1895"]), ("h3", ["a"]),
                   ("n1", []), ("n2", []))
    preds = {"h1": "Paris city", "h2": "", "h3": "", "n1": "", "n2": "something"}
    # Raw (EM, F1): h1 (0, max(2/3, 0.8)), h2 (0, 0), h3 (1, 1), n1 (1, 1), n2 (0, 0).
    result = m.evaluate_v2(data, preds)
    assert list(result) == ["exact", "f1", "total", "HasAns_exact", "HasAns_f1",
                            "HasAns_total", "NoAns_exact", "NoAns_f1", "NoAns_total"]
    assert result["exact"] == pytest.approx(40.0) and result["f1"] == pytest.approx(56.0)
    assert (result["HasAns_f1"], result["HasAns_total"]) == (pytest.approx(60.0), 3)
    assert (result["NoAns_exact"], result["NoAns_total"]) == (pytest.approx(50.0), 2)

    # na_probs (run_squad's null_odds) above na_prob_thresh 1.0 mean "no answer": right for
    # n2 (now 1), wrong for h3 (now 0).
    na = {"h1": -2.0, "h2": 0.5, "n1": 0.5, "n2": 3.0, "h3": 5.0}
    result = m.evaluate_v2(data, preds, na_probs=na)
    assert result["exact"] == pytest.approx(40.0) and result["f1"] == pytest.approx(56.0)
    assert result["NoAns_exact"] == 100.0 and result["HasAns_exact"] == 0.0
    # Best threshold, in na order h1, h2, n1, n2, h3 from 2 (the no-answer questions right):
    # EM 0, 0, 0, -1, +1 -> never above 2: 40 at 0.0; F1 +0.8 at -2.0 -> 2.8: 56 at -2.0.
    assert (result["best_exact"], result["best_exact_thresh"]) == (pytest.approx(40.0), 0.0)
    assert (result["best_f1"], result["best_f1_thresh"]) == (pytest.approx(56.0), -2.0)
    # At 4.0 only h3 is "no answer" (wrong) and n2 keeps its wrong answer: EM n1 only.
    assert m.evaluate_v2(data, preds, na_probs=na, na_prob_thresh=4.0)["exact"] == \
        pytest.approx(20.0)


def varied_predictions(data, seed):
    """Right answers, answers with an extra word, "", articles, random spans and missing
    ones, and na_probs with many ties."""
    rng = random.Random(seed)
    preds, na_probs = {}, {}
    for article in data:
        for paragraph in article["paragraphs"]:
            words = paragraph["context"].split()
            for qa in paragraph["qas"]:
                r = rng.random()
                answers = [a["text"] for a in qa["answers"]]
                if r < 0.3 and answers:
                    text = rng.choice(answers)
                elif r < 0.5 and answers:
                    text = answers[0] + " " + rng.choice(words)
                elif r < 0.6:
                    text = ""
                elif r < 0.65:
                    text = "The"
                else:
                    i = rng.randrange(len(words))
                    text = " ".join(words[i:i + rng.randrange(1, 6)])
                preds[qa["id"]] = text
                na_probs[qa["id"]] = round(rng.gauss(0, 3), rng.choice([0, 1, 6]))
    return preds, na_probs


@pytest.fixture(scope="module")
def hf_squad_metrics():
    """transformers' squad_metrics functions from the hf venv (its file executed without the
    transformers package: the two package imports it has are only for other functions)."""
    require_hf_venv("transformers", "its squad_metrics.py is the oracle")
    found = glob.glob(os.path.join(HF_VENV, "lib/python3*/site-packages/transformers/data/"
                                            "metrics/squad_metrics.py"))
    assert found, f"transformers in {HF_VENV} has no data/metrics/squad_metrics.py"
    source = pathlib.Path(found[0]).read_text(encoding="utf-8")
    source = source.replace("from ...models.bert import BasicTokenizer\n", "")
    source = source.replace("from ...utils import logging\n", "")
    source = source.replace("logger = logging.get_logger(__name__)\n", "")
    module = types.ModuleType("hf_squad_metrics")
    exec(compile(source, found[0], "exec"), module.__dict__)  # noqa: S102
    return module


@pytest.mark.parametrize("version", ["1.1", "2.0"])
def test_v2_equals_transformers_port(hf_squad_metrics, shared_data, version):
    hf = hf_squad_metrics
    data = json.loads((shared_data / "SQuAD" / f"dev-v{version}.json").read_text("utf-8"))
    data = data["data"][::4]  # 12 and 9 articles: a few thousand questions
    preds, na_probs = varied_predictions(data, seed=1)
    examples = [types.SimpleNamespace(qas_id=qa["id"], answers=qa["answers"])
                for article in data for p in article["paragraphs"] for qa in p["qas"]]
    for threshold in (1.0, 0.0):
        expected = hf.squad_evaluate(examples, preds, na_probs, threshold)
        assert m.evaluate_v2(data, preds, na_probs, threshold) == expected
    exact, f1 = hf.get_raw_scores(examples, preds)
    assert m.get_raw_scores(data, preds) == (exact, f1)
    assert sum(f1.values()) > sum(exact.values()) > 0
