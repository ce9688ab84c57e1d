"""CoNLL files: `read_conll` (one `word ... tag` line per word, a blank line between sentences,
-DOCSTART- lines skipped; a bad line an error naming its file and line), the labels of a
training file, and the `word gold predicted` files conlleval reads.
"""
import os

from bert_tf.errors import argument_error, file_error
from bert_tf.io_utils import atomic_open, read_text

DOCSTART = "-DOCSTART-"
OUTSIDE_TAG = "O"


class ConllSentences(list):
    """The (words, tags) sentences of a CoNLL file (a list), which also know where they came
    from: `path`, and `first_lines[i]`, the line number of sentence i's first word (its word j
    is on line first_lines[i] + j: one word per line). A slice or copy is a plain list."""

    def __init__(self, sentences=(), path=None, first_lines=()):
        super().__init__(sentences)
        self.path = path
        self.first_lines = list(first_lines)

    def where(self, sentence_index, word_index):
        """"path:line" of a word, or None when not known."""
        if self.path is None or sentence_index >= len(self.first_lines):
            return None
        return f"{self.path}:{self.first_lines[sentence_index] + word_index}"


def read_conll(path, require_tags=True):
    """The sentences of a CoNLL file, each a (words, tags) pair of lists (a ConllSentences).

    One `word ... tag` line per word, columns separated by whitespace (the word is the first
    column, the tag the last, so CoNLL-2003's `word POS chunk NER` works as is); a blank line
    between sentences; `-DOCSTART-` lines skipped. With require_tags=False (a file to predict),
    a line holding only the word gets the tag None; otherwise such a line is an InputError
    naming the file and line, as are a missing file, bytes that are not UTF-8 and a file
    without sentences.
    """
    text = read_text(path, "CoNLL file")
    sentences, words, tags = ConllSentences(path=path), [], []
    for line_number, line in enumerate(text.split("\n"), start=1):
        columns = line.split()
        if not columns or columns[0] == DOCSTART:
            if words:
                sentences.append((words, tags))
                words, tags = [], []
            continue
        if not words:
            sentences.first_lines.append(line_number)
        if len(columns) == 1 and require_tags:
            raise file_error(path, f"{columns[0]!r} has no tag (expected `word ... tag` "
                                   f"columns)", line_number)
        words.append(columns[0])
        tags.append(columns[-1] if len(columns) > 1 else None)
    if words:
        sentences.append((words, tags))
    if not sentences:
        raise file_error(path, "no sentences (expected `word ... tag` lines, a blank line "
                               "between sentences)")
    return sentences


def label_list_from(sentences):
    """The distinct tags of the sentences, sorted, with "O" first when present.

    "O" first gives it id 0, the `label_ids` value of unscored positions. Tags None (words to
    predict) are not labels.
    """
    tags = {tag for _, sentence_tags in sentences for tag in sentence_tags if tag is not None}
    return sorted(tags, key=lambda tag: (tag != OUTSIDE_TAG, tag))


def write_conll_predictions(path, sentences, predicted_tags):
    """Writes `word gold predicted` lines, a blank line after each sentence (what conlleval reads).

    A sentence without gold tags (read with require_tags=False) is written as `word predicted`.
    The file appears under `path` only once complete.
    """
    if len(sentences) != len(predicted_tags):
        raise ValueError(f"{len(sentences)} sentences but {len(predicted_tags)} predicted")
    with atomic_open(path, "w") as f:
        for index, ((words, tags), predicted) in enumerate(zip(sentences, predicted_tags)):
            if len(words) != len(predicted):
                raise ValueError(f"sentence {index}: {len(words)} words but {len(predicted)} "
                                 f"predicted tags")
            for word, tag, predicted_tag in zip(words, tags, predicted):
                columns = (word, predicted_tag) if tag is None else (word, tag, predicted_tag)
                f.write(" ".join(columns) + "\n")
            f.write("\n")


def read_sentences(data_dir, file_name, require_tags=True):
    """The sentences of data_dir/file_name (`read_conll`); none is an error naming data_dir."""
    path = os.path.join(data_dir, file_name)
    sentences = read_conll(path, require_tags)
    if not sentences:
        raise argument_error("data_dir", f"{path} holds no sentence")
    return sentences
