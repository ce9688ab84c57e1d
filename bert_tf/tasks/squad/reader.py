"""SQuAD files read as the original run_squad reads them: `read_squad_examples` (contexts split
into whitespace words with character-to-word offsets; training answers located by offset, a
mismatching one skipped and counted), a bad file an error naming the question.
"""
import dataclasses
import json
import random
from typing import Optional

from bert_tf.errors import file_error
from bert_tf.io_utils import read_text

TRAINING_SHUFFLE_SEED = 12345


@dataclasses.dataclass
class SquadExample:
    """One question about one paragraph (the original's SquadExample).

    `doc_tokens` are the paragraph's whitespace words (the same list object for all questions
    of a paragraph). For training, `start_position` / `end_position` are the answer's first and
    last word (-1 for an impossible question) and `orig_answer_text` its text ("" if
    impossible); for prediction they are None.
    """
    qas_id: str
    question_text: str
    doc_tokens: list
    orig_answer_text: Optional[str] = None
    start_position: Optional[int] = None
    end_position: Optional[int] = None
    is_impossible: bool = False


@dataclasses.dataclass
class SkippedAnswer:
    """A training question skipped because its answer text is not where its offset says:
    `answer_text` (whitespace-normalized) was not found in `found_text`, the words the offset
    and length cover ("" when the offset lies outside the context)."""
    qas_id: str
    answer_text: str
    found_text: str


def _is_whitespace(c):
    return c == " " or c == "\t" or c == "\r" or c == "\n" or ord(c) == 0x202F


def split_context(paragraph_text):
    """(doc_tokens, char_to_word_offset): the original's whitespace words of a context and, for
    each character, the index of the word it belongs to (whitespace: the word before it, -1
    before the first word)."""
    doc_tokens = []
    char_to_word_offset = []
    prev_is_whitespace = True
    for c in paragraph_text:
        if _is_whitespace(c):
            prev_is_whitespace = True
        else:
            if prev_is_whitespace:
                doc_tokens.append(c)
            else:
                doc_tokens[-1] += c
            prev_is_whitespace = False
        char_to_word_offset.append(len(doc_tokens) - 1)
    return doc_tokens, char_to_word_offset


def load_squad_json(input_file):
    """The parsed JSON of a SQuAD file; InputError naming the file (and line) if it is not
    UTF-8 JSON with a "data" list."""
    text = read_text(input_file, "SQuAD file")
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as e:
        raise file_error(input_file, f"malformed JSON: {e.msg} (column {e.colno})",
                         e.lineno) from None
    if not isinstance(parsed, dict) or not isinstance(parsed.get("data"), list):
        raise file_error(input_file, 'not a SQuAD file: expected a JSON object with a "data" '
                                     "list of articles")
    return parsed


class _Where:
    """Names a place in a SQuAD file for error messages."""

    def __init__(self, input_file):
        self.input_file = input_file

    def error(self, message, article=None, paragraph=None, qa_index=None, qas_id=None):
        if qas_id is not None:
            where = f"question {qas_id!r}"
        elif qa_index is not None:
            where = f"question {qa_index} of paragraph {paragraph} of article {article}"
        elif paragraph is not None:
            where = f"paragraph {paragraph} of article {article}"
        else:
            where = f"article {article}"
        return file_error(self.input_file, f"{where}: {message}")


def _field(obj, name, kind, where, **at):
    """obj[name], checked to be of `kind` (a type or tuple of types)."""
    if not isinstance(obj, dict):
        raise where.error(f"expected a JSON object, got {type(obj).__name__}", **at)
    if name not in obj:
        raise where.error(f"missing field {name!r}", **at)
    value = obj[name]
    # bool is an int in Python; an answer_start true/false is a mistake, not an offset.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        kind_name = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise where.error(f"field {name!r} should be {kind_name}, got "
                          f"{type(value).__name__}", **at)
    return value


def read_squad_examples(input_file, is_training, version_2_with_negative=False, skipped=None,
                        log=None, data=None):
    """Reads a SQuAD JSON file into a list of `SquadExample` (the original's function).

    Args:
      input_file: the file (local path or URL); also names it in errors when `data` is given.
      is_training: read answers (positions), as the original's training mode.
      version_2_with_negative: SQuAD 2.0: training questions carry `is_impossible`.
      skipped: optional list; each training question skipped because its answer text does not
        match the context at its offset is appended as a `SkippedAnswer`.
      log: optional callable taking a warning line per skipped question.
      data: the file's parsed JSON, if already loaded (`load_squad_json`).

    Raises InputError naming the file and the question for malformed JSON, missing or mistyped
    fields, and a training question without exactly one answer.
    """
    if data is None:
        data = load_squad_json(input_file)
    where = _Where(input_file)
    examples = []
    for a, entry in enumerate(data["data"]):
        paragraphs = _field(entry, "paragraphs", list, where, article=a)
        for p, paragraph in enumerate(paragraphs):
            at = dict(article=a, paragraph=p)
            paragraph_text = _field(paragraph, "context", str, where, **at)
            qas = _field(paragraph, "qas", list, where, **at)
            doc_tokens, char_to_word_offset = split_context(paragraph_text)
            for q, qa in enumerate(qas):
                qas_id = _field(qa, "id", str, where, **at, qa_index=q)
                qat = dict(qas_id=qas_id)
                question_text = _field(qa, "question", str, where, **qat)
                example = SquadExample(qas_id=qas_id, question_text=question_text,
                                       doc_tokens=doc_tokens)
                if is_training:
                    if not _read_training_answer(example, qa, where, version_2_with_negative,
                                                 char_to_word_offset, skipped, log):
                        continue
                examples.append(example)
    return examples


def _read_training_answer(example, qa, where, version_2_with_negative, char_to_word_offset,
                          skipped, log):
    """Sets the example's answer fields; False if the answer does not match (skipped)."""
    at = dict(qas_id=example.qas_id)
    is_impossible = False
    if version_2_with_negative:
        is_impossible = _field(qa, "is_impossible", bool, where, **at)
    answers = _field(qa, "answers", list, where, **at)
    example.is_impossible = is_impossible
    if is_impossible:
        example.start_position = example.end_position = -1
        example.orig_answer_text = ""
        return True
    if len(answers) != 1:
        raise where.error(f"for training, each question should have exactly 1 answer, this "
                          f"one has {len(answers)}", **at)
    orig_answer_text = _field(answers[0], "text", str, where, **at)
    answer_offset = _field(answers[0], "answer_start", int, where, **at)
    cleaned_answer_text = " ".join(orig_answer_text.split())
    doc_tokens = example.doc_tokens
    try:  # Python indexing, as the original (a negative offset counts from the end)
        start_position = char_to_word_offset[answer_offset]
        end_position = char_to_word_offset[answer_offset + len(orig_answer_text) - 1]
    except IndexError:
        actual_text = None
    else:
        actual_text = " ".join(doc_tokens[start_position:(end_position + 1)])
    if actual_text is None or actual_text.find(cleaned_answer_text) == -1:
        if skipped is not None:
            skipped.append(SkippedAnswer(example.qas_id, cleaned_answer_text, actual_text or ""))
        if log is not None:
            if actual_text is None:
                log(f"Could not find answer of {example.qas_id}: offset {answer_offset} is "
                    f"outside the context")
            else:
                log(f"Could not find answer: '{actual_text}' vs. '{cleaned_answer_text}'")
        return False
    example.orig_answer_text = orig_answer_text
    example.start_position = start_position
    example.end_position = end_position
    return True


def shuffle_training_examples(examples, seed=TRAINING_SHUFFLE_SEED):
    """Shuffles in place as the original's main: `random.Random(12345).shuffle(examples)`."""
    random.Random(seed).shuffle(examples)
    return examples
