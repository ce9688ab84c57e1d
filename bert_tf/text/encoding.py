"""`Encoding`, what `FastTokenizer.encode_batch` gives for each text: its word pieces, their ids
and their character offsets, as views into one array per batch (`encodings` slices them).
"""
import numpy


class Encoding:
    """One text's word pieces and where they are.

    tokens:  list of str, the word pieces (FullTokenizer.tokenize's output).
    ids:     int32 numpy array [len(tokens)], their vocabulary ids.
    offsets: int32 numpy array [len(tokens), 2], each piece's (start, end) character offsets
             into the text, end exclusive: `start, end = encoding.offsets[i]`.
    `.tolist()` turns either into Python ints; `tokens, ids, offsets = encoding` unpacks it.

    ids and offsets are views into one array per batch: a Python int per id and a tuple per
    offset would cost more than the tokenization itself.
    """
    __slots__ = ("tokens", "ids", "offsets")

    def __init__(self, tokens, ids, offsets):
        self.tokens = tokens
        self.ids = ids
        self.offsets = offsets

    def __iter__(self):
        return iter((self.tokens, self.ids, self.offsets))

    def __eq__(self, other):
        if not isinstance(other, Encoding):
            return NotImplemented
        return (self.tokens == other.tokens and numpy.array_equal(self.ids, other.ids)
                and numpy.array_equal(self.offsets, other.offsets))

    __hash__ = None

    def __repr__(self):
        return (f"Encoding(tokens={self.tokens!r}, ids={self.ids.tolist()!r}, "
                f"offsets={self.offsets.tolist()!r})")


def encodings(tokens, ids, offsets, bounds):
    """One Encoding per row of flat tokens, ids and offsets; row i is bounds[i]:bounds[i + 1]."""
    return [Encoding(tokens[begin:end], ids[begin:end], offsets[begin:end])
            for begin, end in zip(bounds, bounds[1:])]
