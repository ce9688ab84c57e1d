"""create_pretraining_data's input: text files read in blocks of whole lines or in windows of
whole documents (never more than a block in memory), tokenized into a `Corpus` of token ids
with the original's document rules, in worker processes or not.
"""
import dataclasses
import itertools

import numpy as np

from bert_tf import io_utils
from bert_tf.data.pretraining.workers import ordered_map, worker_state
from bert_tf.errors import argument_error
from bert_tf.tokenization import FullTokenizer


@dataclasses.dataclass
class Corpus:
    """Documents as token ids: `tokens[seg_bounds[s]:seg_bounds[s+1]]` is segment (line) s and
    `seg_bounds[doc_bounds[d]:doc_bounds[d+1]]` the segments of document d (no empty ones).
    `separators`: the positions in `tokens` of tokens that are not input text (the [SEP]s
    `join_documents` puts between documents), sorted; None: every token is input text."""

    tokens: np.ndarray      # int32 [num_tokens]
    seg_bounds: np.ndarray  # int64 [num_segments + 1]
    doc_bounds: np.ndarray  # int64 [num_documents + 1]
    separators: np.ndarray = None  # int64 [num_separators]

    @property
    def num_documents(self):
        return len(self.doc_bounds) - 1

    @property
    def num_tokens(self):
        return len(self.tokens)


def join_documents(corpus, sep_id):
    """RoBERTa's FULL-SENTENCES stream: the documents of `corpus` in input order as one
    document, one `sep_id` token between consecutive documents (a one-token segment of its
    own; the lines stay segments), the separators' positions in `separators`."""
    if corpus.num_documents <= 1:  # nothing to join (a streaming window can hold no document)
        return Corpus(corpus.tokens, corpus.seg_bounds, corpus.doc_bounds, np.zeros(0, np.int64))
    doc_starts = corpus.seg_bounds[corpus.doc_bounds[1:-1]]  # where documents 1, 2, ... start
    tokens = np.insert(corpus.tokens, doc_starts, np.int32(sep_id))
    separators = doc_starts + np.arange(len(doc_starts), dtype=np.int64)
    # A segment bound b moves by the separators before it; at a document's start b, the end of
    # the document before (before the separator) and the start of the next (after it).
    seg_bounds = np.union1d(corpus.seg_bounds + np.searchsorted(doc_starts, corpus.seg_bounds),
                            corpus.seg_bounds + np.searchsorted(doc_starts, corpus.seg_bounds,
                                                                side="right"))
    doc_bounds = np.array([0, len(seg_bounds) - 1], np.int64)
    return Corpus(tokens, seg_bounds.astype(np.int64), doc_bounds, separators)


class CorpusBuilder:
    """Builds a `Corpus` from tokenized lines fed in order (the original's document rules).

    The original starts with one empty document, starts a new one at every blank line, appends
    each line's tokens (if any) to the last document, and finally drops empty documents.
    """

    def __init__(self):
        self._token_chunks = [np.zeros(0, np.int32)]
        self._line_counts = [np.zeros(0, np.int64)]  # tokens per line
        self._line_blank = [np.zeros(0, np.bool_)]   # line is blank after strip()

    def add(self, token_ids, counts, blank):
        """token_ids: int32 ids of the lines' tokens; counts, blank: per-line arrays."""
        self._token_chunks.append(np.asarray(token_ids, dtype=np.int32))
        self._line_counts.append(np.asarray(counts, dtype=np.int64))
        self._line_blank.append(np.asarray(blank, dtype=np.bool_))

    def build(self):
        counts = np.concatenate(self._line_counts)
        blank = np.concatenate(self._line_blank)
        tokens = np.concatenate(self._token_chunks)
        self._token_chunks = self._line_counts = self._line_blank = None
        # Document number of each line: blank lines open a new document.
        doc_of_line = np.cumsum(blank)
        has_tokens = counts > 0
        seg_lengths = counts[has_tokens]
        seg_doc = doc_of_line[has_tokens]
        seg_bounds = np.zeros(len(seg_lengths) + 1, dtype=np.int64)
        np.cumsum(seg_lengths, out=seg_bounds[1:])
        # Segments are grouped by document in order; empty documents have no segment at all.
        starts = np.flatnonzero(np.diff(seg_doc, prepend=-1))
        doc_bounds = np.append(starts, len(seg_doc)).astype(np.int64)
        return Corpus(tokens, seg_bounds, doc_bounds)


def tokenize_lines(tokenizer, vocab, lines):
    """Tokenizes stripped lines: (int32 ids of all tokens, tokens per line, line is blank).

    Uses `tokenizer.tokenize_batch` when the tokenizer has one (FastTokenizer), else
    `tokenizer.tokenize` per line; tokens become ids through `vocab` as the original's
    `convert_tokens_to_ids` does.
    """
    if hasattr(tokenizer, "tokenize_batch"):
        pieces = tokenizer.tokenize_batch(lines)
    else:
        pieces = [tokenizer.tokenize(line) for line in lines]
    counts = np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))
    flat = list(itertools.chain.from_iterable(pieces))
    try:
        ids = np.fromiter(map(vocab.__getitem__, flat), dtype=np.int32, count=len(flat))
    except KeyError as e:
        raise argument_error("vocab_file", f"the tokenizer produced {e.args[0]!r}, which is not "
                                           f"in the vocabulary (a WordPiece vocabulary needs "
                                           f"[UNK])") from None
    blank = np.fromiter((not line for line in lines), dtype=np.bool_, count=len(lines))
    return ids, counts, blank


def _iter_raw_blocks(path, block_bytes):
    """Yields (first_line_number, bytes) of the file: ~block_bytes of whole lines at a time,
    each block ending with b"\n" except a last line without one."""
    with io_utils.open_input(path, "input file") as reader:
        line_number = 1
        rest = b""
        while True:
            chunk = reader.read(block_bytes)
            if not chunk:
                break
            data = rest + chunk
            cut = data.rfind(b"\n") + 1
            if cut == 0:
                rest = data
                continue
            rest = data[cut:]
            yield line_number, data[:cut]
            line_number += data.count(b"\n", 0, cut)
        if rest:
            yield line_number, rest


def _block_lines(block, path, line_number):
    """The stripped lines of a raw block (split on "\n" only; a final "\n" ends a line)."""
    text = io_utils.decode_utf8(block[:-1] if block.endswith(b"\n") else block, path, line_number)
    return [line.strip() for line in text.split("\n")]


def iter_line_blocks(input_files, block_bytes=1 << 22):
    """Yields (path, first_line_number, list of stripped lines) in order, ~block_bytes at a time.

    Lines are split on b"\n" only (as the original's GFile.readline) and `str.strip()`-ed.
    Memory is bounded by the block size whatever the file size.
    """
    for path in input_files:
        for line_number, block in _iter_raw_blocks(path, block_bytes):
            yield path, line_number, _block_lines(block, path, line_number)


def iter_window_spans(input_files, window_bytes, block_bytes=1 << 20, with_lines=False):
    """Cuts the input into windows of consecutive whole documents; yields (spans, lines) each.

    A window ends at the first blank line (document boundary) once it holds `window_bytes` of
    text (counted as characters of the stripped lines, plus one per line), so it never splits a
    document; the last window takes what is left. Where windows end depends only on the text.
    spans: the window's byte ranges [(path, start, stop)], in order (a window can continue into
    the next file); `read_window_lines(spans)` reads its lines back. lines: the window's
    stripped lines if `with_lines`, else None (memory stays bounded by one block then).
    """
    spans, lines, size = [], [], 0
    for path in input_files:
        start = offset = 0  # the window's first byte in this file; the next line's
        for line_number, block in _iter_raw_blocks(path, block_bytes):
            block_lines = _block_lines(block, path, line_number)
            raw = (block[:-1] if block.endswith(b"\n") else block).split(b"\n")
            for raw_line, line in zip(raw, block_lines):
                offset += len(raw_line) + 1
                if with_lines:
                    lines.append(line)
                size += len(line) + 1
                if size >= window_bytes and not line:
                    spans.append((path, start, offset))
                    yield spans, lines if with_lines else None
                    spans, lines, size = [], [], 0
                    start = offset
            if not block.endswith(b"\n"):
                offset -= 1  # the file's last line has no "\n"
        if offset > start:
            spans.append((path, start, offset))
    if spans:
        yield spans, lines if with_lines else None


def read_window_lines(spans):
    """The stripped lines of a window from its byte ranges (`iter_window_spans`)."""
    lines = []
    for path, start, stop in spans:
        with io_utils.open_input(path, "input file") as reader:
            reader.seek(start)
            lines += _block_lines(reader.read(stop - start), path, None)
    return lines


def iter_windows(input_files, window_bytes, block_bytes=1 << 20):
    """Yields the windows of `iter_window_spans` as lists of stripped lines."""
    for _, lines in iter_window_spans(input_files, window_bytes, block_bytes, with_lines=True):
        yield lines


def _tokenize_block(lines):
    tokenizer = worker_state["tokenizer"]
    return tokenize_lines(tokenizer, tokenizer.vocab, lines)


def read_corpus(input_files, tokenizer, processes=1, progress=None, block_bytes=1 << 20):
    """Reads and tokenizes all input files into a `Corpus` (the original's all_documents).

    Tokenization runs in `processes` processes; the result does not depend on their number.
    """
    builder = CorpusBuilder()
    blocks = (lines for _, _, lines in iter_line_blocks(input_files, block_bytes))
    for ids, counts, blank in ordered_map(_tokenize_block, blocks, processes,
                                          {"tokenizer": tokenizer}):
        builder.add(ids, counts, blank)
        if progress is not None:
            progress.update(len(counts), secondary=len(ids))
    return builder.build()


def make_tokenizer(name, vocab_file, do_lower_case):
    """The tokenizer named by create_pretraining_data's --tokenizer (same tokens either way):
    "full" (FullTokenizer with a word cache; starts instantly) or "fast" (FastTokenizer;
    imports TensorFlow)."""
    if name == "fast":
        from bert_tf.text.fast_tokenization import FastTokenizer

        return FastTokenizer(vocab_file, do_lower_case=do_lower_case)
    return FullTokenizer(vocab_file, do_lower_case=do_lower_case)


def check_documents(num_documents, input_files):
    """No document in the input is an error naming the files."""
    if num_documents == 0:
        names = ", ".join(input_files)
        raise argument_error("input_file", f"no text in {names} (every line is empty or has no "
                                           f"token)")
