"""SQuAD predictions from start/end logits: the original's `write_predictions`, vectorized.

Same results as the original run_squad's `write_predictions` (tests compare the three files
byte for byte with the reference release's, including logits with ties):
- per window (feature), the n_best_size best start and end positions (`_get_best_indexes`: a
  stable sort, so equal logits keep position order);
- candidate spans: both ends in the window's context (`token_to_orig_map`), the start in its
  max-context window, end >= start, at most max_answer_length tokens;
- all candidates of a question sorted by start + end logit (stable: ties keep the order
  window, start rank, end rank), then the best n_best_size distinct texts, each de-tokenized
  (" ##" joins) and projected back onto the context's original words (`get_final_text` with
  its `_strip_spaces` alignment; the original's text when the alignment fails);
- SQuAD 2.0 (`version_2_with_negative`): the null answer "" scored by the window with the
  smallest [CLS] start + end logit, always in the n-best; `null_odds.json` holds null score
  minus the best non-null score, and "" is predicted when that exceeds
  null_score_diff_threshold;
- probabilities: the original's `_compute_softmax` over the n-best scores;
- files: json.dumps(..., indent=4) + "\\n", written atomically (bert_tf.io_utils).

What differs is speed. The original sorts every window's 2 x max_seq_length logits in Python
and tries n_best_size^2 pairs per window in a Python loop; here the top positions of all windows
come from one numpy partition (ties at the cut resolved exactly as the stable sort) and the pairs
are filtered as arrays, so the Python work left is the n-best texts (`get_final_text`, its
basic tokenization cached by word) and the JSON (written by a specialised encoder with
json.dumps' exact output, as the standard one has no C path with indent); the files are
identical, and the speed-up is measured by `python -m bench.finetuning.squad_postprocess`
(docs/fine_tuning.md).

One case the original does not survive: with SQuAD 2.0, a question whose only candidate is the
null answer (no window has a valid span) makes the original fail (`best_non_null_entry` is
None). Here it predicts "" and its null odds are the null score itself (the difference to a
zero-logit "empty" answer, as Hugging Face's port does).
"""
import collections
import json
import math
from json.encoder import encode_basestring_ascii

import numpy as np

from bert_tf.io_utils import atomic_open
from bert_tf.tokenization import BasicTokenizer

PREDICTIONS_FILE = "predictions.json"
NBEST_FILE = "nbest_predictions.json"
NULL_ODDS_FILE = "null_odds.json"


# ---------------------------------------------------------------------------------------------
# The original's helpers
# ---------------------------------------------------------------------------------------------


def _get_best_indexes(logits, n_best_size):
    """The original's: positions of the n_best_size largest logits, largest first, ties in
    position order."""
    index_and_score = sorted(enumerate(logits), key=lambda x: x[1], reverse=True)
    return [index for index, _ in index_and_score[:n_best_size]]


def best_indexes(logits, n_best_size):
    """`_get_best_indexes` of every row of `logits` [rows, positions] at once: int array
    [rows, min(n_best_size, positions)], the same positions in the same order.

    A partition finds each row's k largest; a row where the k-th largest value is tied with a
    position the partition left out is sorted whole (stable), so ties resolve as the original's
    stable sort: the earlier position first.
    """
    logits = np.asarray(logits)
    rows, width = logits.shape
    k = min(n_best_size, width)
    if k <= 0 or rows == 0:
        return np.zeros((rows, max(k, 0)), dtype=np.int64)
    negated = -logits
    if k == width:
        return np.argsort(negated, axis=1, kind="stable")
    part = np.argpartition(negated, k - 1, axis=1)[:, :k]
    part.sort(axis=1)  # position order, so that a stable sort by value keeps it among ties
    row_index = np.arange(rows)[:, None]
    values = negated[row_index, part]
    kth = values.max(axis=1)
    order = np.argsort(values, axis=1, kind="stable")
    result = part[row_index, order]
    # Rows where more than k positions are <= the k-th value: ties at the cut.
    tied = np.flatnonzero((negated <= kth[:, None]).sum(axis=1) > k)
    if tied.size:
        result[tied] = np.argsort(negated[tied], axis=1, kind="stable")[:, :k]
    return result


def _compute_softmax(scores):
    """The original's softmax over raw logits (Python floats, same summation order)."""
    if not scores:
        return []
    max_score = None
    for score in scores:
        if max_score is None or score > max_score:
            max_score = score
    exp_scores = []
    total_sum = 0.0
    for score in scores:
        x = math.exp(score - max_score)
        exp_scores.append(x)
        total_sum += x
    return [score / total_sum for score in exp_scores]


def _project(tok_text, position, orig_text):
    """The original's tok_s_to_ns_map / orig_ns_to_s_map lookups: the position in `orig_text`
    of the character at `position` in `tok_text`, counting non-space characters only; None if
    that character is a space or outside the text."""
    if position < 0 or position >= len(tok_text) or tok_text[position] == " ":
        return None
    n = position - tok_text.count(" ", 0, position)  # its index among non-spaces
    offset = 0
    for piece in orig_text.split(" "):
        if n < len(piece):
            return offset + n
        n -= len(piece)
        offset += len(piece) + 1
    return None


class _BasicTokens:
    """The original BasicTokenizer's tokens of a text, cached by whitespace word (its output
    is the concatenation of its words' tokens)."""

    def __init__(self, do_lower_case):
        self.tokenizer = BasicTokenizer(do_lower_case=do_lower_case)
        self.cache = {}
        self.texts = {}  # whole word -> its tokens joined by spaces

    def __call__(self, text):
        cache = self.cache
        tokens = []
        for word in self.tokenizer.whitespace_words(text):
            pieces = cache.get(word)
            if pieces is None:
                pieces = cache[word] = self.tokenizer.tokenize_word(word)
                if len(cache) > 1 << 18:
                    cache.clear()
            tokens.extend(pieces)
        return tokens

    def joined(self, words):
        """`" ".join(self(" ".join(words)))`, from each word's tokens cached by word (the
        tokens of words joined by spaces are the concatenation of theirs)."""
        texts = self.texts
        parts = []
        for word in words:
            text = texts.get(word)
            if text is None:
                text = texts[word] = " ".join(self(word))
                if len(texts) > 1 << 18:
                    texts.clear()
            if text:
                parts.append(text)
        return " ".join(parts)


def get_final_text(pred_text, orig_text, do_lower_case, log=None, basic_tokens=None,
                   tok_text=None):
    """The original's projection of a de-tokenized prediction back onto the original text.

    The original words are basic-tokenized and aligned character by character with them
    (spaces removed); `pred_text` is located in that tokenization and its ends mapped back.
    When that fails (not found, lengths differ, an end not mapped), returns `orig_text`, and
    tells `log` why (the original's verbose_logging). `tok_text`, if given, is `orig_text`'s
    basic tokens joined by spaces.
    """
    if tok_text is None:
        if basic_tokens is None:
            basic_tokens = _BasicTokens(do_lower_case)
        tok_text = " ".join(basic_tokens(orig_text))

    start_position = tok_text.find(pred_text)
    if start_position == -1:
        if log is not None:
            log(f"Unable to find text: '{pred_text}' in '{orig_text}'")
        return orig_text
    end_position = start_position + len(pred_text) - 1

    # The original builds both texts' character maps without spaces (`_strip_spaces`); the
    # same positions, computed only for the two ends.
    if len(orig_text) - orig_text.count(" ") != len(tok_text) - tok_text.count(" "):
        if log is not None:
            log(f"Length not equal after stripping spaces: '{orig_text.replace(' ', '')}' vs "
                f"'{tok_text.replace(' ', '')}'")
        return orig_text

    orig_start_position = _project(tok_text, start_position, orig_text)
    if orig_start_position is None:
        if log is not None:
            log("Couldn't map start position")
        return orig_text

    orig_end_position = _project(tok_text, end_position, orig_text)
    if orig_end_position is None:
        if log is not None:
            log("Couldn't map end position")
        return orig_text

    return orig_text[orig_start_position:(orig_end_position + 1)]


# ---------------------------------------------------------------------------------------------
# Predictions
# ---------------------------------------------------------------------------------------------


def _logit_rows(features, unique_ids, start_logits, end_logits):
    """(start, end) float64 arrays [features, positions], one row per feature in order."""
    row_of = {int(u): i for i, u in enumerate(np.asarray(unique_ids).reshape(-1).tolist())}
    missing = [f.unique_id for f in features if f.unique_id not in row_of]
    if missing:
        raise ValueError(f"no logits for {len(missing)} of {len(features)} features "
                         f"(unique_id {missing[0]} first)")
    rows = np.fromiter((row_of[f.unique_id] for f in features), dtype=np.int64,
                       count=len(features))
    # float32 -> float64 is exact: the original turns each logit into a Python float.
    start = np.asarray(start_logits, dtype=np.float64)
    end = np.asarray(end_logits, dtype=np.float64)
    if start.ndim != 2 or start.shape != end.shape or start.shape[0] != len(row_of):
        raise ValueError(f"start_logits {start.shape} and end_logits {end.shape} must both be "
                         f"[{len(row_of)} unique_ids, positions]")
    return start[rows], end[rows]


def compute_predictions(examples, features, unique_ids, start_logits, end_logits, n_best_size,
                        max_answer_length, do_lower_case, version_2_with_negative=False,
                        null_score_diff_threshold=0.0, log=None):
    """The content of the original's three prediction files.

    Args:
      examples: the `SquadExample`s (bert_tf.tasks.squad.preprocessor) in order.
      features: their `InputFeatures` (any order; grouped by example_index as the original).
      unique_ids, start_logits, end_logits: the model's outputs: unique ids [N] and logits
        [N, max_seq_length] (numpy or lists), any order; every feature needs its row.
      log: optional callable for the original's verbose_logging lines.

    Returns (predictions, nbest, null_odds): OrderedDicts by question id, as the original's
    all_predictions, all_nbest_json and scores_diff_json (empty unless
    version_2_with_negative).
    """
    by_example = collections.defaultdict(list)
    for feature in features:
        by_example[feature.example_index].append(feature)
    grouped = [f for i in range(len(examples)) for f in by_example.get(i, ())]
    starts, ends = _logit_rows(grouped, unique_ids, start_logits, end_logits)
    num_features, width = starts.shape

    # Each window's n-best start and end positions, and which (start, end) pairs are spans.
    top_start = best_indexes(starts, n_best_size)
    top_end = best_indexes(ends, n_best_size)
    k = top_start.shape[1]
    start_ok = np.zeros((num_features, k), dtype=bool)
    end_ok = np.zeros((num_features, k), dtype=bool)
    for row, (feature, s_list, e_list) in enumerate(
            zip(grouped, top_start.tolist(), top_end.tolist())):
        num_tokens = len(feature.tokens)
        in_context = feature.token_to_orig_map
        max_context = feature.token_is_max_context
        start_ok[row] = [s < num_tokens and s in in_context and max_context.get(s, False)
                         for s in s_list]
        end_ok[row] = [e < num_tokens and e in in_context for e in e_list]
    span_length = top_end[:, None, :] - top_start[:, :, None] + 1
    valid = (start_ok[:, :, None] & end_ok[:, None, :] & (span_length >= 1)
             & (span_length <= max_answer_length))
    cand_row, cand_si, cand_ei = np.nonzero(valid)  # window, start rank, end rank: C order
    cand_start = top_start[cand_row, cand_si]
    cand_end = top_end[cand_row, cand_ei]
    cand_start_logit = starts[cand_row, cand_start]
    cand_end_logit = ends[cand_row, cand_end]
    cand_score = cand_start_logit + cand_end_logit

    # Windows and candidates of each example: contiguous in `grouped` order.
    feature_bounds = np.zeros(len(examples) + 1, dtype=np.int64)
    np.cumsum([len(by_example.get(i, ())) for i in range(len(examples))],
              out=feature_bounds[1:])
    cand_bounds = np.searchsorted(cand_row, feature_bounds)
    null_scores = (starts[:, 0] + ends[:, 0]) if width else np.zeros(num_features)

    basic_tokens = _BasicTokens(do_lower_case)
    all_predictions = collections.OrderedDict()
    all_nbest_json = collections.OrderedDict()
    scores_diff_json = collections.OrderedDict()

    for (example_index, example) in enumerate(examples):
        first_row, last_row = int(feature_bounds[example_index]), int(
            feature_bounds[example_index + 1])
        lo, hi = int(cand_bounds[example_index]), int(cand_bounds[example_index + 1])
        scores = cand_score[lo:hi]

        score_null = 1000000  # large and positive
        null_start_logit = 0
        null_end_logit = 0
        if version_2_with_negative:
            if last_row > first_row:
                row = first_row + int(np.argmin(null_scores[first_row:last_row]))
                if null_scores[row] < score_null:  # argmin: the first of equal minima
                    score_null = float(null_scores[row])
                    null_start_logit = float(starts[row, 0])
                    null_end_logit = float(ends[row, 0])
            scores = np.append(scores, null_start_logit + null_end_logit)
        order = np.argsort(-scores, kind="stable").tolist()

        seen_predictions = set()
        nbest = []  # (text, start_logit, end_logit)
        for i in order:
            if len(nbest) >= n_best_size:
                break
            if i == hi - lo:  # the null candidate (start index 0)
                final_text = ""
                seen_predictions.add(final_text)
                nbest.append((final_text, null_start_logit, null_end_logit))
                continue
            c = lo + i
            feature = grouped[int(cand_row[c])]
            start_index, end_index = int(cand_start[c]), int(cand_end[c])
            tok_tokens = feature.tokens[start_index:(end_index + 1)]
            orig_doc_start = feature.token_to_orig_map[start_index]
            orig_doc_end = feature.token_to_orig_map[end_index]
            orig_tokens = example.doc_tokens[orig_doc_start:(orig_doc_end + 1)]
            tok_text = " ".join(tok_tokens)
            # De-tokenize WordPieces that have been split off, then clean whitespace.
            tok_text = tok_text.replace(" ##", "").replace("##", "")
            tok_text = " ".join(tok_text.strip().split())
            orig_text = " ".join(orig_tokens)
            final_text = get_final_text(tok_text, orig_text, do_lower_case, log=log,
                                        tok_text=basic_tokens.joined(orig_tokens))
            if final_text in seen_predictions:
                continue
            seen_predictions.add(final_text)
            nbest.append((final_text, float(cand_start_logit[c]), float(cand_end_logit[c])))

        if version_2_with_negative and "" not in seen_predictions:
            nbest.append(("", null_start_logit, null_end_logit))
        if not nbest:  # no valid span at all: the original's nonce prediction
            nbest.append(("empty", 0.0, 0.0))

        total_scores = [s + e for (_, s, e) in nbest]
        best_non_null = next((entry for entry in nbest if entry[0]), None)
        probs = _compute_softmax(total_scores)
        nbest_json = []
        for (i, (text, start_logit, end_logit)) in enumerate(nbest):
            output = collections.OrderedDict()
            output["text"] = text
            output["probability"] = probs[i]
            output["start_logit"] = start_logit
            output["end_logit"] = end_logit
            nbest_json.append(output)

        if not version_2_with_negative:
            all_predictions[example.qas_id] = nbest_json[0]["text"]
        else:
            if best_non_null is None:  # the original fails here; see the module docstring
                score_diff = score_null - 0.0 - 0.0
                all_predictions[example.qas_id] = ""
            else:
                # Predict "" iff the null score - the score of best non-null > threshold.
                score_diff = score_null - best_non_null[1] - best_non_null[2]
                if score_diff > null_score_diff_threshold:
                    all_predictions[example.qas_id] = ""
                else:
                    all_predictions[example.qas_id] = best_non_null[0]
            scores_diff_json[example.qas_id] = score_diff
        all_nbest_json[example.qas_id] = nbest_json

    return all_predictions, all_nbest_json, scores_diff_json


class _NotFlat(Exception):
    """A value `_dumps_indent4`'s fast path does not write."""


def _leaf(value):
    """A JSON scalar exactly as json.dumps writes it (ASCII strings, repr of numbers)."""
    if type(value) is float:
        text = float.__repr__(value)
        if text[-1] not in "nf":  # not nan, inf, -inf (json.dumps: NaN, Infinity)
            return text
    elif type(value) is str:
        return encode_basestring_ascii(value)
    elif not isinstance(value, (int, float, str, type(None))):
        raise _NotFlat
    return json.dumps(value)


def _key(key):
    if type(key) is not str:
        raise _NotFlat  # json.dumps converts other keys to strings
    return encode_basestring_ascii(key)


_NBEST_KEYS = ("text", "probability", "start_logit", "end_logit")
_NBEST_ITEM = ('        {\n            "text": %s,\n            "probability": %s,\n'
               '            "start_logit": %s,\n            "end_logit": %s\n        }')


def _dumps_item(item):
    """A dict of scalars in a list in the top-level dict, as json.dumps indent=4 writes it."""
    if not isinstance(item, dict) or not item:
        raise _NotFlat
    if tuple(item) == _NBEST_KEYS:
        return _NBEST_ITEM % tuple(map(_leaf, item.values()))
    return "        {\n" + ",\n".join(
        f"            {_key(k)}: {_leaf(v)}" for k, v in item.items()) + "\n        }"


def _dumps_indent4(obj):
    """json.dumps(obj, indent=4) + "\\n", the original's format.

    The prediction files take a faster path with the same output (the standard encoder
    cannot use its C speedups with indent): a dict of scalars (predictions, null odds) or of
    non-empty lists of non-empty dicts of scalars (the n-best). Anything else goes to
    json.dumps.
    """
    try:
        if not isinstance(obj, dict) or not obj:
            raise _NotFlat
        lines = []
        for key, value in obj.items():
            if isinstance(value, list):
                if not value:
                    raise _NotFlat
                items = ",\n".join(map(_dumps_item, value))
                lines.append(f"    {_key(key)}: [\n{items}\n    ]")
            else:
                lines.append(f"    {_key(key)}: {_leaf(value)}")
        return "{\n" + ",\n".join(lines) + "\n}\n"
    except _NotFlat:
        return json.dumps(obj, indent=4) + "\n"


def write_json(path, obj):
    """Writes `obj` as the original writes its prediction files, atomically."""
    with atomic_open(path, "w") as f:
        f.write(_dumps_indent4(obj))


def write_predictions(examples, features, unique_ids, start_logits, end_logits, n_best_size,
                      max_answer_length, do_lower_case, output_prediction_file,
                      output_nbest_file, output_null_log_odds_file,
                      version_2_with_negative=False, null_score_diff_threshold=0.0, log=None):
    """The original's write_predictions: computes (`compute_predictions`) and writes
    predictions.json, nbest_predictions.json and, for SQuAD 2.0, null_odds.json.

    Returns (predictions, nbest, null_odds) as `compute_predictions`.
    """
    answers = compute_predictions(
        examples, features, unique_ids, start_logits, end_logits, n_best_size,
        max_answer_length, do_lower_case, version_2_with_negative=version_2_with_negative,
        null_score_diff_threshold=null_score_diff_threshold, log=log)
    write_files(answers, output_prediction_file, output_nbest_file, output_null_log_odds_file,
                version_2_with_negative)
    return answers


def write_files(answers, output_prediction_file, output_nbest_file, output_null_log_odds_file,
                version_2_with_negative=False):
    """Writes `compute_predictions`' (predictions, nbest, null_odds) as the original's files:
    null_odds.json only for SQuAD 2.0."""
    predictions, nbest, null_odds = answers
    write_json(output_prediction_file, predictions)
    write_json(output_nbest_file, nbest)
    if version_2_with_negative:
        write_json(output_null_log_odds_file, null_odds)
