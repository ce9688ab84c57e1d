"""Windows over a text too long for one record, and the length checks every packing needs.

`doc_spans`: run_squad's windows, moved a fixed stride; `word_windows`: windows that start at
word boundaries (token classification); `max_context_spans`: run_squad's rule for the window
that scores a piece seen in several. `check_max_seq_length`, `check_doc_stride`: the lengths and
strides these windows and the packing can work with.
"""
import bisect
import collections
import dataclasses

from bert_tf.errors import argument_error

# [CLS] a piece [SEP]: the shortest record.
MIN_SEQ_LENGTH = 3


def check_max_seq_length(max_seq_length, max_position_embeddings=None,
                         minimum=MIN_SEQ_LENGTH):
    """InputError naming max_seq_length when a record of that length cannot hold `[CLS]` a
    piece `[SEP]` (`minimum`) or, given the model's `max_position_embeddings`, does not fit its
    positions."""
    if max_position_embeddings is not None:
        if not minimum <= max_seq_length <= max_position_embeddings:
            raise argument_error("max_seq_length", f"must be in [{minimum}, "
                                                   f"{max_position_embeddings}] "
                                                   f"(max_position_embeddings), got "
                                                   f"{max_seq_length}")
    elif max_seq_length < minimum:
        raise argument_error("max_seq_length", f"must be at least {minimum} ([CLS], a piece, "
                                               f"[SEP]), got {max_seq_length}")


def check_doc_stride(doc_stride, max_seq_length=None):
    """InputError naming doc_stride when it cannot move the windows: below 1 piece or, given
    `max_seq_length` (a window of a single text: max_seq_length - 2 pieces), not less than the
    window, so that windows overlap. None: no windows."""
    if doc_stride is None:
        return
    if max_seq_length is None:
        if doc_stride < 1:
            raise argument_error("doc_stride", f"must be >= 1, got {doc_stride}")
    elif not 1 <= doc_stride < max_seq_length - 2:
        raise argument_error("doc_stride", f"must be at least 1 and less than the window, "
                                           f"max_seq_length - 2 = {max_seq_length - 2} pieces, "
                                           f"got {doc_stride}")


DocSpan = collections.namedtuple("DocSpan", ["start", "length"])


def doc_spans(num_tokens, max_tokens_for_doc, doc_stride):
    """run_squad's sliding windows over `num_tokens` pieces: at most `max_tokens_for_doc` each,
    starting `doc_stride` apart (by the window's length when that is shorter, so that no piece
    is skipped)."""
    spans = []
    start_offset = 0
    while start_offset < num_tokens:
        length = min(num_tokens - start_offset, max_tokens_for_doc)
        spans.append(DocSpan(start=start_offset, length=length))
        if start_offset + length == num_tokens:
            break
        start_offset += min(length, doc_stride)
    return spans


def max_context_spans(spans):
    """{position: index of the span that scores it} for every position in a span (DocSpans):
    run_squad's `_check_is_max_context`, the span where the position has the most context (the
    smaller of its left and right context, plus 0.01 x the span's length), the first on ties."""
    best_score = {}
    best_span = {}
    for span_index, span in enumerate(spans):
        end = span.start + span.length - 1
        bonus = 0.01 * span.length
        for position in range(span.start, end + 1):
            score = min(position - span.start, end - position) + bonus
            previous = best_score.get(position)
            if previous is None or score > previous:
                best_score[position] = score
                best_span[position] = span_index
    return best_span


@dataclasses.dataclass
class Window:
    """Words first_word .. end_word - 1 of a text, as its pieces piece_start .. piece_end - 1.

    piece_end may cut the last word short only when the window holds that single word.
    """
    first_word: int
    end_word: int
    piece_start: int
    piece_end: int

    @property
    def span(self):
        return DocSpan(self.piece_start, self.piece_end - self.piece_start)


def word_windows(word_starts, num_pieces, max_pieces, doc_stride):
    """Windows of at most max_pieces pieces covering every word, starting at word boundaries.

    word_starts: each word's first piece (ascending); num_pieces: the text's pieces. Each
    window holds as many whole words as fit; the next starts at the first word at least
    doc_stride pieces further on, but no later than the word after the window, so no word is
    skipped, and at least one word on, so the loop ends.
    """
    word_ends = word_starts[1:] + [num_pieces]
    num_words = len(word_starts)
    windows, first = [], 0
    while True:
        piece_start = word_starts[first]
        end = first + 1
        while end < num_words and word_ends[end] - piece_start <= max_pieces:
            end += 1
        piece_end = min(word_ends[end - 1], piece_start + max_pieces)
        windows.append(Window(first, end, piece_start, piece_end))
        if end == num_words:
            return windows
        first = bisect.bisect_left(word_starts, piece_start + doc_stride, first + 1, end)


def scoring_windows(windows, word_starts):
    """For each word, the index of the window that scores it: the one where its first piece
    has the most context (`max_context_spans`)."""
    best = max_context_spans([window.span for window in windows])
    return [best[start] for start in word_starts]
