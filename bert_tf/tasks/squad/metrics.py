"""SQuAD evaluation: the official v1.1 and v2.0 evaluation scripts' numbers, as functions.

The official scripts (evaluate-v1.1.py, evaluate-v2.0.py from the SQuAD site) are command
lines; these functions compute the same dicts from the dataset's "data" list and the
predictions, with the same answer normalisation (lower case, punctuation removed, the
articles a/an/the removed as words, whitespace collapsed):

- `evaluate_v1(dataset, predictions)` -> {"exact_match", "f1"} in percent over all questions
  (a question without a prediction scores 0); F1 over normalised tokens, max over the ground
  truths; v1.1's F1 is 0 when no token is shared, even when both sides normalise to nothing.
- `evaluate_v2(dataset, predictions, na_probs=None, na_prob_thresh=1.0)` -> the v2.0
  script's OrderedDict: "exact", "f1", "total", then "HasAns_exact", "HasAns_f1",
  "HasAns_total" and "NoAns_..." when the set has such questions, and with `na_probs`
  (e.g. run_squad's null_odds.json) "best_exact", "best_exact_thresh", "best_f1",
  "best_f1_thresh". Gold answers that normalise to nothing are dropped (an unanswerable
  question's only answer is ""); F1 is 1 when both sides are empty; a prediction whose
  na_prob exceeds na_prob_thresh counts as "no answer"; questions without a prediction are
  left out of the totals (the script prints "Missing prediction for ..."; here `log` gets it).

The v2.0 script's precision-recall curves (--out-image-dir, matplotlib) are not reproduced.
"""
import collections
import re
import string

from bert_tf.errors import InputError, arg

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def normalize_answer(s):
    """Lower text and remove punctuation, articles and extra whitespace (both scripts)."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in _PUNCTUATION)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


# ---------------------------------------------------------------------------------------------
# v1.1
# ---------------------------------------------------------------------------------------------


def f1_score(prediction, ground_truth):
    """v1.1's token F1 (0 when no normalised token is shared)."""
    prediction_tokens = normalize_answer(prediction).split()
    ground_truth_tokens = normalize_answer(ground_truth).split()
    common = collections.Counter(prediction_tokens) & collections.Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    return (2 * precision * recall) / (precision + recall)


def exact_match_score(prediction, ground_truth):
    """v1.1's exact match (a bool)."""
    return normalize_answer(prediction) == normalize_answer(ground_truth)


def metric_max_over_ground_truths(metric_fn, prediction, ground_truths):
    """The best score of `prediction` against any ground truth (v1.1)."""
    return max(metric_fn(prediction, ground_truth) for ground_truth in ground_truths)


def evaluate_v1(dataset, predictions, log=None):
    """The v1.1 script's result for `dataset` (the file's "data" list) and predictions
    ({question id: answer text}): {"exact_match": %, "f1": %}. `log` gets the script's
    "Unanswered question ... will receive score 0." lines."""
    f1 = exact_match = total = 0
    for article in dataset:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                total += 1
                if qa["id"] not in predictions:
                    if log is not None:
                        log(f"Unanswered question {qa['id']} will receive score 0.")
                    continue
                ground_truths = [answer["text"] for answer in qa.get("answers") or ()]
                if not ground_truths:  # the official script fails here (max() of nothing)
                    raise InputError(
                        f"question {qa['id']!r} has no answer: SQuAD 1.1 scoring needs at "
                        f"least one per question (SQuAD 2.0 files: "
                        f"{arg('version_2_with_negative')})")
                prediction = predictions[qa["id"]]
                exact_match += metric_max_over_ground_truths(
                    exact_match_score, prediction, ground_truths)
                f1 += metric_max_over_ground_truths(f1_score, prediction, ground_truths)
    exact_match = 100.0 * exact_match / total
    f1 = 100.0 * f1 / total
    return {"exact_match": exact_match, "f1": f1}


# ---------------------------------------------------------------------------------------------
# v2.0
# ---------------------------------------------------------------------------------------------


def make_qid_to_has_ans(dataset):
    """{question id: whether it has gold answers}."""
    return {qa["id"]: bool(qa["answers"])
            for article in dataset for p in article["paragraphs"] for qa in p["qas"]}


def get_tokens(s):
    if not s:
        return []
    return normalize_answer(s).split()


def compute_exact(a_gold, a_pred):
    return int(normalize_answer(a_gold) == normalize_answer(a_pred))


def compute_f1(a_gold, a_pred):
    """v2.0's token F1: 1 if both are empty after normalisation, 0 if only one is."""
    gold_toks = get_tokens(a_gold)
    pred_toks = get_tokens(a_pred)
    common = collections.Counter(gold_toks) & collections.Counter(pred_toks)
    num_same = sum(common.values())
    if len(gold_toks) == 0 or len(pred_toks) == 0:
        return int(gold_toks == pred_toks)
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(pred_toks)
    recall = 1.0 * num_same / len(gold_toks)
    return (2 * precision * recall) / (precision + recall)


def get_raw_scores(dataset, preds, log=None):
    """({qid: exact}, {qid: f1}) of the questions that have a prediction."""
    exact_scores = {}
    f1_scores = {}
    for article in dataset:
        for p in article["paragraphs"]:
            for qa in p["qas"]:
                qid = qa["id"]
                gold_answers = [a["text"] for a in qa["answers"] if normalize_answer(a["text"])]
                if not gold_answers:
                    gold_answers = [""]  # unanswerable: the only correct answer is ""
                if qid not in preds:
                    if log is not None:
                        log(f"Missing prediction for {qid}")
                    continue
                a_pred = preds[qid]
                exact_scores[qid] = max(compute_exact(a, a_pred) for a in gold_answers)
                f1_scores[qid] = max(compute_f1(a, a_pred) for a in gold_answers)
    return exact_scores, f1_scores


def apply_no_ans_threshold(scores, na_probs, qid_to_has_ans, na_prob_thresh):
    """Scores with predictions whose na_prob > na_prob_thresh taken as "no answer"."""
    new_scores = {}
    for qid, s in scores.items():
        if na_probs[qid] > na_prob_thresh:
            new_scores[qid] = float(not qid_to_has_ans[qid])
        else:
            new_scores[qid] = s
    return new_scores


def make_eval_dict(exact_scores, f1_scores, qid_list=None):
    if not qid_list:
        total = len(exact_scores)
        return collections.OrderedDict([
            ("exact", 100.0 * sum(exact_scores.values()) / total),
            ("f1", 100.0 * sum(f1_scores.values()) / total),
            ("total", total),
        ])
    total = len(qid_list)
    return collections.OrderedDict([
        ("exact", 100.0 * sum(exact_scores[k] for k in qid_list) / total),
        ("f1", 100.0 * sum(f1_scores[k] for k in qid_list) / total),
        ("total", total),
    ])


def merge_eval(main_eval, new_eval, prefix):
    for k in new_eval:
        main_eval[f"{prefix}_{k}"] = new_eval[k]


def find_best_thresh(preds, scores, na_probs, qid_to_has_ans):
    """(best score in %, its na_prob threshold): answering only questions whose na_prob is at
    most the threshold, over thresholds at each question's na_prob (ascending, stable)."""
    num_no_ans = sum(1 for k in qid_to_has_ans if not qid_to_has_ans[k])
    cur_score = num_no_ans
    best_score = cur_score
    best_thresh = 0.0
    qid_list = sorted(na_probs, key=lambda k: na_probs[k])
    for qid in qid_list:
        if qid not in scores:
            continue
        if qid_to_has_ans[qid]:
            diff = scores[qid]
        else:
            diff = -1 if preds[qid] else 0
        cur_score += diff
        if cur_score > best_score:
            best_score = cur_score
            best_thresh = na_probs[qid]
    return 100.0 * best_score / len(scores), best_thresh


def find_all_best_thresh(main_eval, preds, exact_raw, f1_raw, na_probs, qid_to_has_ans):
    best_exact, exact_thresh = find_best_thresh(preds, exact_raw, na_probs, qid_to_has_ans)
    best_f1, f1_thresh = find_best_thresh(preds, f1_raw, na_probs, qid_to_has_ans)
    main_eval["best_exact"] = best_exact
    main_eval["best_exact_thresh"] = exact_thresh
    main_eval["best_f1"] = best_f1
    main_eval["best_f1_thresh"] = f1_thresh


def evaluate_v2(dataset, preds, na_probs=None, na_prob_thresh=1.0, log=None):
    """The v2.0 script's output dict (see the module docstring) for `dataset` (the file's
    "data" list), predictions {qid: text} and optional na_probs {qid: float} (the script's
    --na-prob-file; without it every na_prob is 0.0 and no best thresholds are given)."""
    with_na_probs = na_probs is not None
    if not with_na_probs:
        na_probs = {k: 0.0 for k in preds}
    qid_to_has_ans = make_qid_to_has_ans(dataset)
    has_ans_qids = [k for k, v in qid_to_has_ans.items() if v]
    no_ans_qids = [k for k, v in qid_to_has_ans.items() if not v]
    exact_raw, f1_raw = get_raw_scores(dataset, preds, log=log)
    exact_thresh = apply_no_ans_threshold(exact_raw, na_probs, qid_to_has_ans, na_prob_thresh)
    f1_thresh = apply_no_ans_threshold(f1_raw, na_probs, qid_to_has_ans, na_prob_thresh)
    out_eval = make_eval_dict(exact_thresh, f1_thresh)
    if has_ans_qids:
        merge_eval(out_eval, make_eval_dict(exact_thresh, f1_thresh, qid_list=has_ans_qids),
                   "HasAns")
    if no_ans_qids:
        merge_eval(out_eval, make_eval_dict(exact_thresh, f1_thresh, qid_list=no_ans_qids),
                   "NoAns")
    if with_na_probs:
        find_all_best_thresh(out_eval, preds, exact_raw, f1_raw, na_probs, qid_to_has_ans)
    return out_eval
