"""create_pretraining_data's records: the original's, byte for byte for the same inputs, flags
and seed, and fast (ids in flat arrays, the original's random draws in numba-compiled code,
records serialized by hand), in memory or streamed in bounded windows; and the other layouts
(`layout`). No TensorFlow for local files. docs/create_pretraining_data.md.
"""
import collections
import contextlib
import dataclasses
import gzip as gzip_lib
import itertools
import multiprocessing
import os
import random

import numpy as np
from numba import njit

from bert_tf import io_utils
from bert_tf.errors import argument_error, file_error
from bert_tf.progress import Progress
from bert_tf.tasks.pretraining.layout import PretrainingLayout, record_schema
from bert_tf.tokenization import FullTokenizer

# The original's features, in the order it builds them (the wire order is sorted by key).
INT_FEATURES = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids",
                "next_sentence_labels")
FLOAT_FEATURES = ("masked_lm_weights",)
# Packed sentence pairs: each of a row's next-sentence slots is a position the last layer
# computes and a prediction the head makes, used or not. More than 8 sequences in a row is
# rare (none of WikiText-2 valid's rows at 128 or 512; 3% of CoNLL-2003's short news documents
# at 512), while the bound from the shortest instance is 25 slots at 128 and 102 at 512.
DEFAULT_MAX_SEQUENCES_PER_ROW = 8


# ---------------------------------------------------------------------------------------------
# Options and vocabulary
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class InstanceOptions:
    """The original's instance-creation flags (same names and defaults), and the record layout
    (`PretrainingLayout`'s fields; the defaults are the original's):

      masking: "static" (masks drawn when written) or "dynamic" (`masked_lm_candidates`
        written, masks drawn when read);
      objective: "mlm_nsp" (the original's sentence pairs, half with a random next) or "mlm"
        (one contiguous span of one document per instance, no next-sentence label);
      pack_sequences: several instances per row of exactly max_seq_length tokens, at most
        `max_sequences_per_row` of them (0: as many as the shortest instance allows; with
        next-sentence labels at most DEFAULT_MAX_SEQUENCES_PER_ROW).
    """

    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    dupe_factor: int = 10
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    do_whole_word_mask: bool = False
    masking: str = "static"
    objective: str = "mlm_nsp"
    pack_sequences: bool = False
    max_sequences_per_row: int = 0

    @property
    def next_sentence(self):
        return self.objective == "mlm_nsp"

    @property
    def is_original(self):
        """The original's records (static masks, sentence pairs, one instance per record)."""
        return self.masking == "static" and self.next_sentence and not self.pack_sequences

    @property
    def shortest_sequence(self):
        """Tokens of the shortest instance: [CLS] A [SEP] B [SEP] or [CLS] A [SEP]."""
        return 5 if self.next_sentence else 3

    @property
    def sequences_per_row(self):
        """Instances in a row: 1 unpacked; packed, `max_sequences_per_row` or (0) as many
        shortest instances as fit, with next-sentence slots at most
        DEFAULT_MAX_SEQUENCES_PER_ROW."""
        if not self.pack_sequences:
            return 1
        fit = self.max_seq_length // self.shortest_sequence
        return self.max_sequences_per_row or (min(fit, DEFAULT_MAX_SEQUENCES_PER_ROW)
                                              if self.next_sentence else fit)

    @property
    def layout(self):
        """The PretrainingLayout of the records these options make."""
        return PretrainingLayout(self.masking, self.next_sentence, self.pack_sequences,
                                 self.sequences_per_row if self.pack_sequences else 0)

    def describe(self):
        """The layout in words."""
        return self.layout.describe()

    def validate(self):
        """Raises InputError naming the field for values the original would crash on."""
        if self.masking not in ("static", "dynamic"):
            raise argument_error("masking", f"must be static or dynamic, got {self.masking!r}")
        if self.objective not in ("mlm_nsp", "mlm"):
            raise argument_error("objective",
                                 f"must be mlm_nsp or mlm, got {self.objective!r}")
        if self.max_sequences_per_row < 0:
            raise argument_error("max_sequences_per_row",
                                 f"must be at least 1, got {self.max_sequences_per_row}")
        if self.max_seq_length < 5:
            # [CLS] A [SEP] B [SEP] with A and B non-empty needs max_seq_length - 3 >= 2 (the
            # original's rng.randint(2, max_seq_length - 3) fails below that).
            raise argument_error("max_seq_length",
                                 f"must be at least 5, got {self.max_seq_length}")
        if self.max_seq_length > 65535:
            raise argument_error("max_seq_length",
                                 f"must be at most 65535, got {self.max_seq_length}")
        if self.max_predictions_per_seq < 1:
            raise argument_error("max_predictions_per_seq",
                                 f"must be at least 1, got {self.max_predictions_per_seq}")
        if self.dupe_factor < 1:
            raise argument_error("dupe_factor", f"must be at least 1, got {self.dupe_factor}")
        if not 0.0 < self.masked_lm_prob < 1.0:
            raise argument_error("masked_lm_prob", f"must be in the open interval (0, 1), got "
                                                   f"{self.masked_lm_prob}")
        if not 0.0 <= self.short_seq_prob <= 1.0:
            raise argument_error("short_seq_prob",
                                 f"must be in [0, 1], got {self.short_seq_prob}")


@dataclasses.dataclass
class VocabIds:
    """What the compiled code needs of the vocabulary, as ids.

    `word_ids[k]` is the id of `list(vocab.keys())[k]` (the original's `vocab_words`, from which
    random replacements are drawn); `is_subword[id]` says whether the token starts with "##"
    (whole-word masking joins such a piece to the previous candidate).
    """

    vocab: dict
    cls_id: int
    sep_id: int
    mask_id: int
    word_ids: np.ndarray
    is_subword: np.ndarray

    @classmethod
    def from_vocab(cls, vocab, vocab_file=None):
        """`vocab_file`: its path, for errors (else they name the vocab_file argument)."""
        missing = [t for t in ("[CLS]", "[SEP]", "[MASK]") if t not in vocab]
        if missing:
            message = f"the vocabulary has no {', '.join(missing)} token"
            raise (file_error(vocab_file, message) if vocab_file
                   else argument_error("vocab_file", message))
        word_ids = np.fromiter(vocab.values(), dtype=np.int32, count=len(vocab))
        is_subword = np.zeros(int(word_ids.max()) + 1, dtype=np.bool_)
        for token, index in vocab.items():
            is_subword[index] = token.startswith("##")
        return cls(vocab, vocab["[CLS]"], vocab["[SEP]"], vocab["[MASK]"], word_ids, is_subword)


# ---------------------------------------------------------------------------------------------
# Reading documents
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Corpus:
    """Documents as token ids: `tokens[seg_bounds[s]:seg_bounds[s+1]]` is segment (line) s and
    `seg_bounds[doc_bounds[d]:doc_bounds[d+1]]` the segments of document d (no empty ones)."""

    tokens: np.ndarray      # int32 [num_tokens]
    seg_bounds: np.ndarray  # int64 [num_segments + 1]
    doc_bounds: np.ndarray  # int64 [num_documents + 1]

    @property
    def num_documents(self):
        return len(self.doc_bounds) - 1

    @property
    def num_tokens(self):
        return len(self.tokens)


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


# ---------------------------------------------------------------------------------------------
# CPython's random.Random (MT19937), compiled
# ---------------------------------------------------------------------------------------------
# The state is an int64 array of 625 entries: the 624 words of `random.Random.getstate()[1]`
# followed by its position. Every draw below is the one CPython 3.11 makes.


def rng_state(rng):
    """The compiled generator's state array for a `random.Random` (which is left untouched)."""
    version, internal, _ = rng.getstate()
    return np.array(internal, dtype=np.int64)


def set_rng_state(rng, state):
    """Puts the compiled generator's state back into a `random.Random`."""
    rng.setstate((3, tuple(int(x) for x in state), None))


@njit(cache=True, nogil=True)
def _mt_twist(mt):
    """Regenerates the 624 words (genrand_uint32's refill, in place as in CPython)."""
    for k in range(227):
        y = (mt[k] & 0x80000000) | (mt[k + 1] & 0x7FFFFFFF)
        mt[k] = mt[k + 397] ^ (y >> 1) ^ (0x9908B0DF if y & 1 else 0)
    for k in range(227, 623):
        y = (mt[k] & 0x80000000) | (mt[k + 1] & 0x7FFFFFFF)
        mt[k] = mt[k - 227] ^ (y >> 1) ^ (0x9908B0DF if y & 1 else 0)
    y = (mt[623] & 0x80000000) | (mt[0] & 0x7FFFFFFF)
    mt[623] = mt[396] ^ (y >> 1) ^ (0x9908B0DF if y & 1 else 0)
    mt[624] = 0


@njit(cache=True, nogil=True)
def _genrand_uint32(mt):
    if mt[624] >= 624:
        _mt_twist(mt)
    y = mt[mt[624]]
    mt[624] += 1
    y ^= y >> 11
    y ^= (y << 7) & 0x9D2C5680
    y ^= (y << 15) & 0xEFC60000
    y ^= y >> 18
    return y


@njit(cache=True, nogil=True)
def _random(mt):
    """random.Random.random(): 53 bits from two 32-bit words."""
    a = _genrand_uint32(mt) >> 5
    b = _genrand_uint32(mt) >> 6
    return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0)


@njit(cache=True, nogil=True)
def _bit_length(n):
    k = 0
    if n >= 1 << 16:
        n >>= 16
        k += 16
    if n >= 1 << 8:
        n >>= 8
        k += 8
    while n:
        n >>= 1
        k += 1
    return k


@njit(cache=True, nogil=True)
def _randbelow(mt, n):
    """random.Random._randbelow(n) for 0 < n < 2**32: getrandbits(n.bit_length()) until < n."""
    shift = 32 - _bit_length(n)
    r = _genrand_uint32(mt) >> shift
    while r >= n:
        r = _genrand_uint32(mt) >> shift
    return r


@njit(cache=True, nogil=True)
def _shuffle(mt, x):
    """random.Random.shuffle(x) on an array: x[i] <-> x[randbelow(i + 1)], i from the end."""
    n = len(x)
    if n < 2:
        return
    shift = 32 - _bit_length(n)
    for i in range(n - 1, 0, -1):
        bound = i + 1
        if bound < (1 << (31 - shift)):  # bound lost a bit: getrandbits(k) with one bit less
            shift += 1
        r = _genrand_uint32(mt) >> shift
        while r >= bound:
            r = _genrand_uint32(mt) >> shift
        tmp = x[i]
        x[i] = x[r]
        x[r] = tmp


# ---------------------------------------------------------------------------------------------
# Instances
# ---------------------------------------------------------------------------------------------


class Instances:
    """Training instances, compactly: instance i is

        [CLS] tokens[a_start:a_start+a_len] [SEP] tokens[b_start:b_start+b_len] [SEP]

    with `masked_positions[i, :num_masked[i]]` (sorted) replaced by `masked_replacements` (the
    labels are the original tokens at those positions) and `is_random_next[i]`.
    `order` is the output order (the original's final `rng.shuffle(instances)`).
    """

    def __init__(self, max_predictions_per_seq, capacity):
        # np.zeros maps zeroed pages lazily: only the rows actually written take memory, so the
        # capacity can be a generous upper bound.
        self.size = 0
        self.a_start = np.zeros(capacity, np.int64)
        self.a_len = np.zeros(capacity, np.uint16)
        self.b_start = np.zeros(capacity, np.int64)
        self.b_len = np.zeros(capacity, np.uint16)
        self.is_random_next = np.zeros(capacity, np.uint8)
        self.num_masked = np.zeros(capacity, np.int32)
        self.masked_positions = np.zeros((capacity, max_predictions_per_seq), np.uint16)
        self.masked_replacements = np.zeros((capacity, max_predictions_per_seq), np.int32)
        self.order = None

    def arrays(self):
        return (self.a_start, self.a_len, self.b_start, self.b_len, self.is_random_next,
                self.num_masked, self.masked_positions, self.masked_replacements)

    def __len__(self):
        return self.size


@njit(cache=True, nogil=True)
def _mask_instance(mt, seq, length, masked_lm_prob, max_predictions_per_seq, word_ids,
                   is_subword, do_whole_word_mask, cls_id, sep_id, mask_id, cand_pos,
                   group_start, group_order, covered, out_pos, out_rep):
    """The original's create_masked_lm_predictions on ids; returns the number masked.

    seq[:length] are the instance's ids (unchanged); the masked positions (sorted) and their
    replacement ids go to out_pos/out_rep. With do_whole_word_mask a "##" piece joins the
    previous candidate's group (GitHub master; also across [SEP], as there).
    """
    num_cands = 0
    num_groups = 0
    for i in range(length):
        token = seq[i]
        if token == cls_id or token == sep_id:
            continue
        if do_whole_word_mask and num_groups >= 1 and is_subword[token]:
            cand_pos[num_cands] = i
            num_cands += 1
        else:
            group_start[num_groups] = num_cands
            cand_pos[num_cands] = i
            num_cands += 1
            num_groups += 1
    group_start[num_groups] = num_cands
    for g in range(num_groups):
        group_order[g] = g
    _shuffle(mt, group_order[:num_groups])

    num_to_predict = min(max_predictions_per_seq,
                         max(1, int(np.rint(length * masked_lm_prob))))
    for i in range(length):
        covered[i] = False
    num_masked = 0
    for gi in range(num_groups):
        if num_masked >= num_to_predict:
            break
        g = group_order[gi]
        first = group_start[g]
        last = group_start[g + 1]
        # If adding a whole-word mask would exceed the maximum number of predictions, skip it.
        if num_masked + (last - first) > num_to_predict:
            continue
        any_covered = False
        for c in range(first, last):
            if covered[cand_pos[c]]:
                any_covered = True
                break
        if any_covered:
            continue
        for c in range(first, last):
            index = cand_pos[c]
            covered[index] = True
            if _random(mt) < 0.8:  # 80%: [MASK]
                replacement = mask_id
            elif _random(mt) < 0.5:  # 10%: keep the original
                replacement = seq[index]
            else:  # 10%: a random vocabulary word
                replacement = word_ids[_randbelow(mt, len(word_ids))]
            out_pos[num_masked] = index
            out_rep[num_masked] = replacement
            num_masked += 1
    # Sort by position (insertion sort: at most max_predictions_per_seq entries).
    for i in range(1, num_masked):
        p = out_pos[i]
        r = out_rep[i]
        j = i - 1
        while j >= 0 and out_pos[j] > p:
            out_pos[j + 1] = out_pos[j]
            out_rep[j + 1] = out_rep[j]
            j -= 1
        out_pos[j + 1] = p
        out_rep[j + 1] = r
    return num_masked


@njit(cache=True, nogil=True)
def _create_instances(mt, tokens, seg_bounds, doc_bounds, doc_order, dupe, doc_index, end_dupe,
                      max_seq_length, short_seq_prob, masked_lm_prob, max_predictions_per_seq,
                      word_ids, is_subword, do_whole_word_mask, cls_id, sep_id, mask_id,
                      two_segments, do_mask,
                      n, limit, a_start_out, a_len_out, b_start_out, b_len_out, rnd_out,
                      nmask_out, mpos_out, mrep_out):
    """The original's dupe/document loop and create_instances_from_document, on ids.

    Writes instances from row n on, starting at (dupe, doc_index); stops before end_dupe or
    once `limit` rows are filled (at a document's end); returns (rows filled, next dupe, next
    doc_index). two_segments=False (objective "mlm"): instances are single spans [CLS] A [SEP]
    of whole segments (b_len 0), cut as the original cuts chunks but never past
    max_seq_length - 2 tokens; do_mask=False (dynamic masking): no masks drawn (num_masked 0).
    """
    num_docs = len(doc_order)
    max_num_tokens = max_seq_length - 3 if two_segments else max_seq_length - 2
    seq = np.empty(max_seq_length, np.int32)
    cand_pos = np.empty(max_seq_length, np.int64)
    group_start = np.empty(max_seq_length + 1, np.int64)
    group_order = np.empty(max_seq_length, np.int64)
    covered = np.empty(max_seq_length, np.bool_)
    while dupe < end_dupe:
        while doc_index < num_docs:
            doc = doc_order[doc_index]
            first_seg = doc_bounds[doc]
            num_segs = doc_bounds[doc + 1] - first_seg
            if n >= limit:
                return n, dupe, doc_index
            target_seq_length = max_num_tokens
            if _random(mt) < short_seq_prob:
                target_seq_length = 2 + _randbelow(mt, max_num_tokens - 1)
            chunk_first = 0  # first segment (within the document) of the current chunk
            current_length = 0
            i = 0
            while i < num_segs:
                s = first_seg + i
                seg_len = seg_bounds[s + 1] - seg_bounds[s]
                if not two_segments:
                    # One span of whole segments: it ends at the target length, at the
                    # document's end, or before a segment that would not fit (which starts
                    # the next span); a single segment too long is trimmed at either end, as
                    # truncate_seq_pair trims.
                    overflow = current_length > 0 and current_length + seg_len > max_num_tokens
                    end = i
                    if not overflow:
                        current_length += seg_len
                        end = i + 1
                        if i < num_segs - 1 and current_length < target_seq_length:
                            i += 1
                            continue
                        i += 1
                    a_start = seg_bounds[first_seg + chunk_first]
                    a_len = seg_bounds[first_seg + end] - a_start
                    while a_len > max_num_tokens:
                        if _random(mt) < 0.5:
                            a_start += 1
                        a_len -= 1
                    length = a_len + 2
                    seq[0] = cls_id
                    seq[1:1 + a_len] = tokens[a_start:a_start + a_len]
                    seq[length - 1] = sep_id
                    nmask_out[n] = 0
                    if do_mask:
                        nmask_out[n] = _mask_instance(
                            mt, seq, length, masked_lm_prob, max_predictions_per_seq, word_ids,
                            is_subword, do_whole_word_mask, cls_id, sep_id, mask_id, cand_pos,
                            group_start, group_order, covered, mpos_out[n], mrep_out[n])
                    a_start_out[n] = a_start
                    a_len_out[n] = a_len
                    b_start_out[n] = 0
                    b_len_out[n] = 0
                    rnd_out[n] = 0
                    n += 1
                    chunk_first = end
                    current_length = 0
                    continue
                current_length += seg_len
                if i == num_segs - 1 or current_length >= target_seq_length:
                    chunk_len = i - chunk_first + 1
                    a_end = 1
                    if chunk_len >= 2:
                        a_end = 1 + _randbelow(mt, chunk_len - 1)
                    c0 = first_seg + chunk_first
                    a_start = seg_bounds[c0]
                    a_len = seg_bounds[c0 + a_end] - a_start
                    if chunk_len == 1 or _random(mt) < 0.5:
                        is_random_next = 1
                        target_b_length = target_seq_length - a_len
                        random_doc_index = 0
                        for _ in range(10):
                            random_doc_index = _randbelow(mt, num_docs)
                            if random_doc_index != doc_index:
                                break
                        rdoc = doc_order[random_doc_index]
                        r_first = doc_bounds[rdoc]
                        r_num = doc_bounds[rdoc + 1] - r_first
                        random_start = _randbelow(mt, r_num)
                        b_start = seg_bounds[r_first + random_start]
                        b_len = 0
                        for j in range(random_start, r_num):
                            b_len = seg_bounds[r_first + j + 1] - b_start
                            if b_len >= target_b_length:
                                break
                        # The unused segments are "put back".
                        i -= chunk_len - a_end
                    else:
                        is_random_next = 0
                        b_start = seg_bounds[c0 + a_end]
                        b_len = seg_bounds[c0 + chunk_len] - b_start
                    # truncate_seq_pair: trim the longer side, front or back at random.
                    while a_len + b_len > max_num_tokens:
                        if a_len > b_len:
                            if _random(mt) < 0.5:
                                a_start += 1
                            a_len -= 1
                        else:
                            if _random(mt) < 0.5:
                                b_start += 1
                            b_len -= 1
                    # [CLS] A [SEP] B [SEP]
                    length = a_len + b_len + 3
                    seq[0] = cls_id
                    seq[1:1 + a_len] = tokens[a_start:a_start + a_len]
                    seq[1 + a_len] = sep_id
                    seq[2 + a_len:2 + a_len + b_len] = tokens[b_start:b_start + b_len]
                    seq[length - 1] = sep_id
                    nmask_out[n] = 0
                    if do_mask:
                        nmask_out[n] = _mask_instance(
                            mt, seq, length, masked_lm_prob, max_predictions_per_seq, word_ids,
                            is_subword, do_whole_word_mask, cls_id, sep_id, mask_id, cand_pos,
                            group_start, group_order, covered, mpos_out[n], mrep_out[n])
                    a_start_out[n] = a_start
                    a_len_out[n] = a_len
                    b_start_out[n] = b_start
                    b_len_out[n] = b_len
                    rnd_out[n] = is_random_next
                    n += 1
                    chunk_first = i + 1
                    current_length = 0
                i += 1
            doc_index += 1
        doc_index = 0
        dupe += 1
    return n, dupe, doc_index


@njit(cache=True, nogil=True)
def _shuffled_range(mt, n):
    order = np.arange(n)
    _shuffle(mt, order)
    return order


def create_instances(corpus, rng, options, vocab_ids, progress=None, instances_per_call=1 << 15):
    """The original's create_training_instances after reading: returns `Instances`.

    Makes exactly the original's calls on `rng` (a `random.Random`, advanced in place): shuffle
    the documents, then for each dupe and document the instance draws, then shuffle the
    instances (their output order is `Instances.order`).
    """
    mt = rng_state(rng)
    num_docs = corpus.num_documents
    doc_order = _shuffled_range(mt, num_docs)
    # A document gives at most one instance per segment (each consumes at least one).
    instances = Instances(options.max_predictions_per_seq,
                          options.dupe_factor * (len(corpus.seg_bounds) - 1))
    dupe, doc_index = 0, 0
    while num_docs and dupe < options.dupe_factor:
        docs_before, size_before = dupe * num_docs + doc_index, instances.size
        instances.size, dupe, doc_index = _create_instances(
            mt, corpus.tokens, corpus.seg_bounds, corpus.doc_bounds, doc_order, dupe, doc_index,
            options.dupe_factor, options.max_seq_length, options.short_seq_prob,
            options.masked_lm_prob, options.max_predictions_per_seq, vocab_ids.word_ids,
            vocab_ids.is_subword, options.do_whole_word_mask, vocab_ids.cls_id, vocab_ids.sep_id,
            vocab_ids.mask_id, options.next_sentence, options.masking == "static",
            instances.size, instances.size + instances_per_call,
            *instances.arrays())
        if progress is not None:
            progress.update(dupe * num_docs + doc_index - docs_before,
                            secondary=instances.size - size_before)
    instances.order = _shuffled_range(mt, instances.size)
    set_rng_state(rng, mt)
    return instances


# ---------------------------------------------------------------------------------------------
# tf.train.Example records, serialized by hand
# ---------------------------------------------------------------------------------------------
# Example{features: Features{feature: map<string, Feature>}} in the wire format of
# SerializeToString(deterministic=True): map entries sorted by key, each `key = 1` then
# `value = 2`; Int64List/FloatList values packed (no list here is empty: max_seq_length >= 5,
# max_predictions_per_seq >= 1).

_SORTED_KEYS = sorted(INT_FEATURES + FLOAT_FEATURES)
assert _SORTED_KEYS == ["input_ids", "input_mask", "masked_lm_ids", "masked_lm_positions",
                        "masked_lm_weights", "next_sentence_labels", "segment_ids"]
_KEY_BYTES = np.frombuffer("".join(_SORTED_KEYS).encode(), dtype=np.uint8)
_KEY_OFFSETS = np.cumsum([0] + [len(k) for k in _SORTED_KEYS]).astype(np.int64)


def _crc32c_tables():
    table = np.zeros((8, 256), dtype=np.int64)
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
        table[0, i] = crc
    for t in range(1, 8):
        for i in range(256):
            prev = int(table[t - 1, i])
            table[t, i] = (prev >> 8) ^ int(table[0, prev & 0xFF])
    return table


_CRC_TABLES = _crc32c_tables()


@njit(cache=True, nogil=True)
def _crc32c(tables, buf, start, stop):
    """CRC-32C (Castagnoli) of buf[start:stop], slicing by 8."""
    crc = 0xFFFFFFFF
    p = start
    while p + 8 <= stop:
        crc ^= (np.int64(buf[p]) | (np.int64(buf[p + 1]) << 8) | (np.int64(buf[p + 2]) << 16)
                | (np.int64(buf[p + 3]) << 24))
        crc = (tables[7, crc & 0xFF] ^ tables[6, (crc >> 8) & 0xFF]
               ^ tables[5, (crc >> 16) & 0xFF] ^ tables[4, crc >> 24]
               ^ tables[3, buf[p + 4]] ^ tables[2, buf[p + 5]]
               ^ tables[1, buf[p + 6]] ^ tables[0, buf[p + 7]])
        p += 8
    while p < stop:
        crc = tables[0, (crc ^ buf[p]) & 0xFF] ^ (crc >> 8)
        p += 1
    return crc ^ 0xFFFFFFFF


@njit(cache=True, nogil=True)
def _masked_crc(crc):
    """TFRecord's masked CRC: rotate right by 15 bits and add a constant."""
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


@njit(cache=True, nogil=True)
def _varint_size(v):
    n = 1
    while v >= 128:
        v >>= 7
        n += 1
    return n


@njit(cache=True, nogil=True)
def _put_varint(buf, p, v):
    while v >= 128:
        buf[p] = (v & 127) | 128
        v >>= 7
        p += 1
    buf[p] = v
    return p + 1


@njit(cache=True, nogil=True)
def _put_u32(buf, p, v):
    buf[p] = v & 0xFF
    buf[p + 1] = (v >> 8) & 0xFF
    buf[p + 2] = (v >> 16) & 0xFF
    buf[p + 3] = (v >> 24) & 0xFF
    return p + 4


@njit(cache=True, nogil=True)
def _start_record(buf, p, features_size, crc_tables):
    """Writes a TFRecord's framing (uint64 length of the Example, masked CRC of the length) and
    the Example's first byte (field 1, `features`) at p; returns the position of that byte,
    where the data (and its CRC, written after it) starts."""
    example_size = 1 + _varint_size(features_size) + features_size
    for k in range(8):
        buf[p + k] = (example_size >> (8 * k)) & 0xFF
    start = _put_u32(buf, p + 8, _masked_crc(_crc32c(crc_tables, buf, p, p + 8)))
    buf[start] = 0x0A  # Example.features
    return start


@njit(cache=True, nogil=True)
def _feature_sizes(key_len, payload):
    """(map entry size, Feature size, list message size) for a non-empty packed payload."""
    list_message = 1 + _varint_size(payload) + payload
    feature = 1 + _varint_size(list_message) + list_message
    entry = 1 + _varint_size(key_len) + key_len + 1 + _varint_size(feature) + feature
    return entry, feature, list_message


@njit(cache=True, nogil=True)
def _put_feature_header(buf, p, key_bytes, key_offsets, f, payload, is_float):
    """Writes map entry f up to its packed payload (which the caller writes next)."""
    key_len = key_offsets[f + 1] - key_offsets[f]
    entry, feature, list_message = _feature_sizes(key_len, payload)
    buf[p] = 0x0A  # Features.feature: a map entry
    p = _put_varint(buf, p + 1, entry)
    buf[p] = 0x0A  # entry key
    p = _put_varint(buf, p + 1, key_len)
    buf[p:p + key_len] = key_bytes[key_offsets[f]:key_offsets[f + 1]]
    p += key_len
    buf[p] = 0x12  # entry value: Feature
    p = _put_varint(buf, p + 1, feature)
    buf[p] = 0x12 if is_float else 0x1A  # Feature.float_list / Feature.int64_list
    p = _put_varint(buf, p + 1, list_message)
    buf[p] = 0x0A  # packed values
    return _put_varint(buf, p + 1, payload)


@njit(cache=True, nogil=True)
def _serialize_records(indices, tokens, a_start, a_len, b_start, b_len, is_random_next,
                       num_masked, masked_positions, masked_replacements, cls_id, sep_id,
                       max_seq_length, max_predictions_per_seq, key_bytes, key_offsets,
                       crc_tables):
    """TFRecord-framed serialized Examples of instances `indices`, in that order.

    Returns (bytes as a uint8 array, record end offsets, real tokens, masked tokens). The bytes
    are those of `tf.train.Example.SerializeToString(deterministic=True)` of the original's
    features: keys sorted, int64 values packed varints, floats packed little-endian.
    """
    t_len = max_seq_length
    p_len = max_predictions_per_seq
    # Upper bound of one record (ids take at most 5 bytes as varints).
    bound = 16 + 7 * 24 + len(key_bytes) + 5 * t_len + 2 * t_len + 10 * p_len + 4 * p_len + 1
    buf = np.empty(len(indices) * bound, np.uint8)
    ends = np.empty(len(indices), np.int64)
    ids = np.zeros(t_len, np.int64)
    labels = np.zeros(p_len, np.int64)
    key_len = np.diff(key_offsets)
    total_tokens = 0
    total_masked = 0
    p = 0
    for r in range(len(indices)):
        i = indices[r]
        la = np.int64(a_len[i])
        lb = np.int64(b_len[i])
        length = la + lb + 3
        nm = np.int64(num_masked[i])
        total_tokens += length
        total_masked += nm
        ids[:] = 0
        ids[0] = cls_id
        ids[1:1 + la] = tokens[a_start[i]:a_start[i] + la]
        ids[1 + la] = sep_id
        ids[2 + la:2 + la + lb] = tokens[b_start[i]:b_start[i] + lb]
        ids[length - 1] = sep_id
        labels[:] = 0
        for k in range(nm):
            position = np.int64(masked_positions[i, k])
            labels[k] = ids[position]  # the label is the id before masking
            ids[position] = masked_replacements[i, k]
        # Payload sizes (packed values), in sorted key order.
        ids_payload = 0
        for k in range(t_len):
            ids_payload += _varint_size(ids[k])
        labels_payload = 0
        for k in range(p_len):
            labels_payload += _varint_size(labels[k])
        positions_payload = p_len - nm
        for k in range(nm):
            positions_payload += _varint_size(np.int64(masked_positions[i, k]))
        payloads = (ids_payload, t_len, labels_payload, positions_payload, 4 * p_len, 1, t_len)
        features_size = 0
        for f in range(7):
            entry = _feature_sizes(key_len[f], payloads[f])[0]
            features_size += 1 + _varint_size(entry) + entry
        data_start = p = _start_record(buf, p, features_size, crc_tables)
        p = _put_varint(buf, p + 1, features_size)
        # input_ids
        p = _put_feature_header(buf, p, key_bytes, key_offsets, 0, ids_payload, False)
        for k in range(t_len):
            p = _put_varint(buf, p, ids[k])
        # input_mask
        p = _put_feature_header(buf, p, key_bytes, key_offsets, 1, t_len, False)
        buf[p:p + length] = 1
        buf[p + length:p + t_len] = 0
        p += t_len
        # masked_lm_ids
        p = _put_feature_header(buf, p, key_bytes, key_offsets, 2, labels_payload, False)
        for k in range(p_len):
            p = _put_varint(buf, p, labels[k])
        # masked_lm_positions
        p = _put_feature_header(buf, p, key_bytes, key_offsets, 3, positions_payload, False)
        for k in range(nm):
            p = _put_varint(buf, p, np.int64(masked_positions[i, k]))
        buf[p:p + p_len - nm] = 0
        p += p_len - nm
        # masked_lm_weights (float32 1.0 = 0x3F800000, little-endian)
        p = _put_feature_header(buf, p, key_bytes, key_offsets, 4, 4 * p_len, True)
        for k in range(p_len):
            p = _put_u32(buf, p, 0x3F800000 if k < nm else 0)
        # next_sentence_labels
        p = _put_feature_header(buf, p, key_bytes, key_offsets, 5, 1, False)
        buf[p] = is_random_next[i]
        p += 1
        # segment_ids
        p = _put_feature_header(buf, p, key_bytes, key_offsets, 6, t_len, False)
        buf[p:p + la + 2] = 0
        buf[p + la + 2:p + length] = 1
        buf[p + length:p + t_len] = 0
        p += t_len
        p = _put_u32(buf, p, _masked_crc(_crc32c(crc_tables, buf, data_start, p)))
        ends[r] = p
    return buf[:p], ends, total_tokens, total_masked


def serialize_instances(instances, corpus, options, vocab_ids, indices):
    """TFRecord-framed records of `instances[indices]`: (bytes, record end offsets, stats).

    stats = (real tokens, masked tokens, random-next instances) over these records.
    """
    indices = np.ascontiguousarray(indices, dtype=np.int64)
    buf, ends, num_tokens, num_masked = _serialize_records(
        indices, corpus.tokens, *instances.arrays(), vocab_ids.cls_id, vocab_ids.sep_id,
        options.max_seq_length, options.max_predictions_per_seq, _KEY_BYTES, _KEY_OFFSETS,
        _CRC_TABLES)
    num_random = int(instances.is_random_next[indices].sum())
    return buf, ends, (int(num_tokens), int(num_masked), num_random)


# ---------------------------------------------------------------------------------------------
# Rows: one instance each, or several packed (the layouts beyond the original's)
# ---------------------------------------------------------------------------------------------
# Every feature a layout can have, sorted by key (the wire order); (name, length kind, float).
# Length kinds: "T" max_seq_length, "P" max_predictions_per_seq, "S" sequences per row.
_LAYOUT_FEATURES = (
    ("input_ids", "T", False), ("input_mask", "T", False),
    ("masked_lm_candidates", "T", False), ("masked_lm_ids", "P", False),
    ("masked_lm_positions", "P", False), ("masked_lm_weights", "P", True),
    ("next_sentence_labels", "S", False), ("next_sentence_positions", "S", False),
    ("next_sentence_weights", "S", True), ("position_ids", "T", False),
    ("segment_ids", "T", False), ("sequence_ids", "T", False))
assert [name for name, _, _ in _LAYOUT_FEATURES] == sorted(n for n, _, _ in _LAYOUT_FEATURES)
_LAYOUT_KEY_BYTES = np.frombuffer("".join(n for n, _, _ in _LAYOUT_FEATURES).encode(), np.uint8)
_LAYOUT_KEY_OFFSETS = np.cumsum([0] + [len(n) for n, _, _ in _LAYOUT_FEATURES]).astype(np.int64)
(_F_IDS, _F_MASK, _F_CANDIDATES, _F_LABELS, _F_POSITIONS, _F_WEIGHTS, _F_NSP_LABELS,
 _F_NSP_POSITIONS, _F_NSP_WEIGHTS, _F_POSITION_IDS, _F_SEGMENTS, _F_SEQUENCE_IDS) = range(12)


def layout_features(options):
    """{feature name: number of values} of the records `options` make (`layout.record_schema`
    of their layout)."""
    return record_schema(options.max_seq_length, options.max_predictions_per_seq,
                         options.layout).lengths()


@dataclasses.dataclass
class Rows:
    """The records' rows: row r holds instances `members[bounds[r]:bounds[r+1]]`, in that
    order, and rows are written in order; bounds None: one instance a row, `members[r]`."""

    bounds: np.ndarray   # int64 [num_rows + 1], or None
    members: np.ndarray  # int64 [num_instances]

    def __len__(self):
        return len(self.members) if self.bounds is None else len(self.bounds) - 1


@njit(cache=True, nogil=True)
def _pack_rows(item_order, lengths, masked, max_len, max_masked, max_seqs, min_len, bin_of):
    """Best-fit decreasing over lengths: items taken in `item_order` (longest first), each put
    in the open row with the least room that still takes its tokens and its masked predictions
    (rows bucketed by room left, a few rows tried per bucket), else a new row. A row stays open
    while it has fewer than max_seqs items and room for min_len tokens. Writes bin_of[item];
    returns the number of rows."""
    n = len(lengths)
    head = np.full(max_len + 1, -1, np.int64)
    nxt = np.empty(n, np.int64)
    prv = np.empty(n, np.int64)
    room = np.empty(n, np.int64)
    used_masked = np.empty(n, np.int64)
    count = np.empty(n, np.int64)
    num_bins = 0
    for k in item_order:
        length = lengths[k]
        m = masked[k]
        chosen = -1
        for s in range(length, max_len + 1):
            b = head[s]
            tries = 0
            while b != -1 and tries < 8:
                if used_masked[b] + m <= max_masked:
                    chosen = b
                    break
                b = nxt[b]
                tries += 1
            if chosen != -1:
                break
        if chosen == -1:
            chosen = num_bins
            num_bins += 1
            room[chosen] = max_len
            used_masked[chosen] = 0
            count[chosen] = 0
        else:  # unlink it from its bucket
            if prv[chosen] == -1:
                head[room[chosen]] = nxt[chosen]
            else:
                nxt[prv[chosen]] = nxt[chosen]
            if nxt[chosen] != -1:
                prv[nxt[chosen]] = prv[chosen]
        room[chosen] -= length
        used_masked[chosen] += m
        count[chosen] += 1
        bin_of[k] = chosen
        if count[chosen] < max_seqs and room[chosen] >= min_len:
            s = room[chosen]
            nxt[chosen] = head[s]
            prv[chosen] = -1
            if head[s] != -1:
                prv[head[s]] = chosen
            head[s] = chosen
    return num_bins


@njit(cache=True, nogil=True)
def _rows_in_order(order, bin_of, num_bins):
    """Rows ordered by their first instance in `order` (the shuffled order), each row's
    instances in that order too: (bounds, members)."""
    rank = np.full(num_bins, -1, np.int64)
    sizes = np.zeros(num_bins, np.int64)
    r = 0
    for k in range(len(order)):
        b = bin_of[k]
        if rank[b] == -1:
            rank[b] = r
            r += 1
        sizes[rank[b]] += 1
    bounds = np.zeros(num_bins + 1, np.int64)
    for i in range(num_bins):
        bounds[i + 1] = bounds[i] + sizes[i]
    fill = bounds[:-1].copy()
    members = np.empty(len(order), np.int64)
    for k in range(len(order)):
        row = rank[bin_of[k]]
        members[fill[row]] = order[k]
        fill[row] += 1
    return bounds, members


def instance_lengths(instances, options):
    """Tokens of each instance, [CLS] and [SEP]s included."""
    extra = 3 if options.next_sentence else 2
    return (instances.a_len[:instances.size].astype(np.int64)
            + instances.b_len[:instances.size] + extra)


def make_rows(instances, options):
    """The rows of `instances` (see `Rows`): unpacked, one per instance in output order;
    packed (`options.pack_sequences`), best-fit decreasing (`_pack_rows`; deterministic, no
    random draw: the same instances as unpacked, whatever the packing), each row at most
    max_seq_length tokens, max_predictions_per_seq masked predictions and
    `options.sequences_per_row` instances; rows keep the shuffled order (ordered by their
    first instance in it)."""
    order = np.asarray(instances.order, dtype=np.int64)
    if not options.pack_sequences or len(order) == 0:
        return Rows(None, order)
    lengths = instance_lengths(instances, options)[order]
    masked = instances.num_masked[:instances.size].astype(np.int64)[order]
    by_length = np.argsort(-lengths, kind="stable")
    bin_of = np.empty(len(order), np.int64)
    num_bins = _pack_rows(by_length, lengths, masked, options.max_seq_length,
                          options.max_predictions_per_seq, options.sequences_per_row,
                          int(lengths.min()), bin_of)
    return Rows(*_rows_in_order(order, bin_of, num_bins))


@njit(cache=True, nogil=True)
def _serialize_rows(row_ids, bounds, members, tokens, a_start, a_len, b_start, b_len,
                    is_random_next, num_masked, masked_positions, masked_replacements, cls_id,
                    sep_id, is_subword, do_whole_word_mask, two_segments, present, lengths,
                    is_float, key_bytes, key_offsets, crc_tables, bound):
    """TFRecord-framed serialized Examples of rows `row_ids` (any layout: the `present`
    features of `_LAYOUT_FEATURES`, `lengths` values each), as `_serialize_records`.

    Returns (bytes, record end offsets, real tokens, masked tokens, random next, sequences).
    """
    num_features = len(present)
    width = 0
    for f in range(num_features):
        width = max(width, lengths[f])
    values = np.zeros((num_features, width), np.int64)
    payloads = np.zeros(num_features, np.int64)
    key_len = np.diff(key_offsets)
    buf = np.empty(len(row_ids) * bound, np.uint8)
    ends = np.empty(len(row_ids), np.int64)
    total_tokens = 0
    total_masked = 0
    total_random = 0
    total_sequences = 0
    p = 0
    for r in range(len(row_ids)):
        row = row_ids[r]
        values[:, :] = 0
        offset = 0
        num_labels = 0
        for s in range(bounds[row + 1] - bounds[row]):
            i = members[bounds[row] + s]
            la = np.int64(a_len[i])
            lb = np.int64(b_len[i])
            # [CLS] A [SEP] (B [SEP])
            values[_F_IDS, offset] = cls_id
            values[_F_IDS, offset + 1:offset + 1 + la] = tokens[a_start[i]:a_start[i] + la]
            values[_F_IDS, offset + 1 + la] = sep_id
            length = la + 2
            if two_segments:
                values[_F_IDS, offset + 2 + la:offset + 2 + la + lb] = (
                    tokens[b_start[i]:b_start[i] + lb])
                values[_F_IDS, offset + 2 + la + lb] = sep_id
                length += lb + 1
                values[_F_SEGMENTS, offset + 2 + la:offset + length] = 1
            for k in range(length):
                values[_F_MASK, offset + k] = 1
                values[_F_POSITION_IDS, offset + k] = k
                values[_F_SEQUENCE_IDS, offset + k] = s + 1
            # Masking candidates: 0 [CLS]/[SEP], 2 a "##" piece right after a candidate (with
            # whole-word masking), else 1.
            for k in range(length):
                token = values[_F_IDS, offset + k]
                if token == cls_id or token == sep_id:
                    continue
                if (do_whole_word_mask and k > 0 and values[_F_CANDIDATES, offset + k - 1] != 0
                        and is_subword[token]):
                    values[_F_CANDIDATES, offset + k] = 2
                else:
                    values[_F_CANDIDATES, offset + k] = 1
            nm = np.int64(num_masked[i])
            for k in range(nm):
                position = offset + np.int64(masked_positions[i, k])
                values[_F_POSITIONS, num_labels] = position
                values[_F_LABELS, num_labels] = values[_F_IDS, position]
                values[_F_WEIGHTS, num_labels] = 1
                values[_F_IDS, position] = masked_replacements[i, k]
                num_labels += 1
            values[_F_NSP_LABELS, s] = is_random_next[i]
            values[_F_NSP_POSITIONS, s] = offset
            values[_F_NSP_WEIGHTS, s] = 1
            offset += length
            total_masked += nm
            total_random += is_random_next[i]
            total_sequences += 1
        total_tokens += offset
        features_size = 0
        for f in range(num_features):
            if not present[f]:
                continue
            if is_float[f]:
                payloads[f] = 4 * lengths[f]
            else:
                payload = 0
                for k in range(lengths[f]):
                    payload += _varint_size(values[f, k])
                payloads[f] = payload
            entry = _feature_sizes(key_len[f], payloads[f])[0]
            features_size += 1 + _varint_size(entry) + entry
        data_start = p = _start_record(buf, p, features_size, crc_tables)
        p = _put_varint(buf, p + 1, features_size)
        for f in range(num_features):
            if not present[f]:
                continue
            p = _put_feature_header(buf, p, key_bytes, key_offsets, f, payloads[f], is_float[f])
            for k in range(lengths[f]):
                if is_float[f]:
                    p = _put_u32(buf, p, 0x3F800000 if values[f, k] else 0)
                else:
                    p = _put_varint(buf, p, values[f, k])
        p = _put_u32(buf, p, _masked_crc(_crc32c(crc_tables, buf, data_start, p)))
        ends[r] = p
    return buf[:p], ends, total_tokens, total_masked, total_random, total_sequences


def serialize_rows(instances, corpus, options, vocab_ids, rows, row_ids):
    """TFRecord-framed records of rows `row_ids` of `rows`: (bytes, record end offsets,
    stats), stats = (real tokens, masked tokens, random-next instances, instances).

    The original's layout goes through `serialize_instances` (its exact bytes); the others
    write the features `layout_features(options)` names.
    """
    row_ids = np.ascontiguousarray(row_ids, dtype=np.int64)
    bounds, members = rows.bounds, rows.members
    if bounds is None:  # one instance a row
        members = members[row_ids]
        bounds = np.arange(len(members) + 1, dtype=np.int64)
        row_ids = np.arange(len(members), dtype=np.int64)
        if options.is_original:
            buf, ends, stats = serialize_instances(instances, corpus, options, vocab_ids,
                                                   members)
            return buf, ends, stats + (len(members),)
    wanted = layout_features(options)
    present = np.array([name in wanted for name, _, _ in _LAYOUT_FEATURES], np.bool_)
    lengths = np.array([wanted.get(name, 0) for name, _, _ in _LAYOUT_FEATURES], np.int64)
    is_float = np.array([flt for _, _, flt in _LAYOUT_FEATURES], np.bool_)
    bound = 16 + len(_LAYOUT_KEY_BYTES) + int(sum(12 + 10 * n for n in wanted.values()))
    buf, ends, num_tokens, num_masked, num_random, num_sequences = _serialize_rows(
        row_ids, bounds, members, corpus.tokens, *instances.arrays(),
        vocab_ids.cls_id, vocab_ids.sep_id, vocab_ids.is_subword, options.do_whole_word_mask,
        options.next_sentence, present, lengths, is_float, _LAYOUT_KEY_BYTES,
        _LAYOUT_KEY_OFFSETS, _CRC_TABLES, bound)
    return buf, ends, (int(num_tokens), int(num_masked), int(num_random), int(num_sequences))


# ---------------------------------------------------------------------------------------------
# Writing TFRecord files
# ---------------------------------------------------------------------------------------------


class RecordFileWriter:
    """Appends already-framed TFRecord bytes to a file written under a temporary name.

    `commit()` renames it to its final name; `discard()` (or an exception in a `with` block)
    removes it, so a run that fails or is killed never leaves a truncated file under the final
    name. With `gzip=True` the file is one gzip stream (TFRecordDataset compression_type="GZIP").
    """

    def __init__(self, path, gzip=False):
        self.path = path
        io_utils.remove_stale_temporaries(path)  # what a killed earlier run left
        self.tmp_path = io_utils.temporary_path(path)
        try:
            if "://" in path:
                self._raw = _remote_gfile(self.tmp_path)
            else:
                if os.path.dirname(path):
                    os.makedirs(os.path.dirname(path), exist_ok=True)
                self._raw = open(self.tmp_path, "wb")
        except OSError as e:
            raise file_error(path, f"cannot write the output file ({e.strerror or e})") from None
        # mtime=0 and no file name in the header: reruns give identical bytes.
        self._file = (gzip_lib.GzipFile(filename="", fileobj=self._raw, mode="wb", compresslevel=6,
                                        mtime=0) if gzip else self._raw)
        self.num_records = 0
        self.num_bytes = 0

    def write(self, framed_records, num_records):
        self._file.write(framed_records)
        self.num_records += num_records
        self.num_bytes += len(framed_records)

    def commit(self):
        if self._file is not self._raw:
            self._file.close()
        self._raw.close()
        _rename(self.tmp_path, self.path)

    def discard(self):
        with contextlib.suppress(Exception):
            self._raw.close()
        with contextlib.suppress(Exception):
            io_utils.remove_path(self.tmp_path)


def _remote_gfile(path):
    import tensorflow as tf

    return tf.io.gfile.GFile(path, "wb")


def _rename(src, dst):
    if "://" in dst:
        import tensorflow as tf

        tf.io.gfile.rename(src, dst, overwrite=True)
    else:
        os.replace(src, dst)


@contextlib.contextmanager
def record_writers(output_files, gzip=False):
    """Opens a `RecordFileWriter` per output file; all are renamed into place only on success."""
    writers = []
    try:
        for path in output_files:
            writers.append(RecordFileWriter(path, gzip=gzip))
        yield writers
        for writer in writers:
            writer.commit()
    except BaseException:
        for writer in writers:
            writer.discard()
        raise


# ---------------------------------------------------------------------------------------------
# Statistics
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Summary:
    """What a run wrote, for the closing summary line.

    `instances` are the training sequences, `records` the rows written (as many unless
    packed); `max_seq_length` and `layout` (`InstanceOptions.describe()`) describe the rows.
    """

    documents: int = 0
    input_tokens: int = 0
    instances: int = 0
    instance_tokens: int = 0
    masked_tokens: int = 0
    random_next: int = 0
    records: int = 0
    records_per_file: dict = dataclasses.field(default_factory=dict)
    options: InstanceOptions = None

    def add_records(self, stats):
        """stats: (real tokens, masked tokens, random next, instances) of records written."""
        tokens, masked, random_next, instances = stats
        self.instance_tokens += tokens
        self.masked_tokens += masked
        self.random_next += random_next
        self.instances += instances

    @property
    def masked_fraction(self):
        """Mean share of an instance's real tokens (incl. [CLS]/[SEP]) that are predicted."""
        return self.masked_tokens / self.instance_tokens if self.instance_tokens else 0.0

    @property
    def random_next_fraction(self):
        return self.random_next / self.instances if self.instances else 0.0

    def padding_fraction(self, rows):
        """Share of `rows` rows' max_seq_length positions that are padding."""
        capacity = rows * (self.options or InstanceOptions()).max_seq_length
        return 1.0 - self.instance_tokens / capacity if capacity else 0.0

    def format(self):
        """The closing summary: records per file, tokens, padding, masked fraction,
        random-next share."""
        options = self.options or InstanceOptions()
        packed = options.pack_sequences
        what = (f"{self.instances} instances in {self.records} rows" if packed
                else f"{self.instances} instances")
        lines = [f"Wrote {what} from {self.documents} documents "
                 f"({self.input_tokens} input tokens):"]
        for path, count in self.records_per_file.items():
            lines.append(f"  {path}: {count} {'rows' if packed else 'instances'}")
        per_instance = self.instance_tokens / self.instances if self.instances else 0.0
        lines.append(f"  tokens in instances: {self.instance_tokens} ({per_instance:.1f} per "
                     f"instance, incl. [CLS]/[SEP])")
        if not options.is_original:
            lines.append(f"  layout: {options.describe()}")
        if packed:
            lines.append(f"  packing: {self.instances} rows before, {self.records} after "
                         f"({self.instances / max(self.records, 1):.2f} instances a row); "
                         f"padding fraction {self.padding_fraction(self.instances):.4f} before, "
                         f"{self.padding_fraction(self.records):.4f} after")
        else:
            lines.append(f"  padding fraction: {self.padding_fraction(self.instances):.4f} of "
                         f"{self.instances} rows x {options.max_seq_length} tokens")
        if options.masking == "static":
            lines.append(f"  masked: {self.masked_tokens} tokens, mean masked fraction "
                         f"{self.masked_fraction:.4f}")
        else:
            lines.append("  masked: none written (dynamic masking: masks are drawn when read)")
        if options.next_sentence:
            lines.append(f"  random next: {self.random_next} "
                         f"({self.random_next_fraction:.4f})")
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Parallel processes
# ---------------------------------------------------------------------------------------------

_WORKER = {}  # per-process state set by _init_worker (the tokenizer, options, ...)


def _init_worker(state):
    _WORKER.clear()
    _WORKER.update(state)


def ordered_map(function, items, processes, state, max_in_flight=None):
    """Yields function(item) in order, from `processes` worker processes (in-process if <= 1).

    At most `max_in_flight` items (default 2 per process) are submitted and not yet consumed,
    so memory stays bounded however many items `items` yields. `state` (a dict) is available to
    `function` as the module's `_WORKER` in every worker.
    """
    if processes <= 1:
        _init_worker(state)
        for item in items:
            yield function(item)
        return
    # fork: workers start in milliseconds and inherit the state without pickling it.
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else None)
    max_in_flight = max_in_flight or 2 * processes
    pending = collections.deque()
    with context.Pool(processes, initializer=_init_worker, initargs=(state,)) as pool:
        for item in items:
            pending.append(pool.apply_async(function, (item,)))
            if len(pending) >= max_in_flight:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()


def _tokenize_block(lines):
    tokenizer = _WORKER["tokenizer"]
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


# ---------------------------------------------------------------------------------------------
# The original's pipeline (default mode)
# ---------------------------------------------------------------------------------------------

WRITE_BATCH = 8192  # records serialized per call (bounds the serialization buffer)


def write_instances(instances, corpus, options, vocab_ids, writers, summary, progress=None,
                    rows=None):
    """The original's write_instance_to_example_files: output order, round-robin over files
    (of rows, when packed: `rows`, by default `make_rows`)."""
    rows = rows if rows is not None else make_rows(instances, options)
    num_rows = len(rows)
    num_writers = len(writers)
    for start in range(0, num_rows, WRITE_BATCH):
        stop = min(start + WRITE_BATCH, num_rows)
        for w, writer in enumerate(writers):
            # Record k (in output order) goes to file k % num_writers.
            first = start + (w - start) % num_writers
            row_ids = np.arange(first, stop, num_writers)
            if len(row_ids) == 0:
                continue
            data, _, stats = serialize_rows(instances, corpus, options, vocab_ids, rows, row_ids)
            writer.write(data, len(row_ids))
            summary.add_records(stats)
        if progress is not None:
            progress.update(stop - start)
    summary.records += num_rows


def create_pretraining_data(input_files, output_files, tokenizer, options, random_seed=12345,
                            gzip=False, processes=1, progress_interval=10.0):
    """Default mode: exactly the original's records, order and output files.

    `tokenizer` is a FullTokenizer or FastTokenizer (same tokens), `options` the original's
    flags (`InstanceOptions`; its layout fields default to the original's records);
    tokenization runs in `processes` processes (same result).
    Reads everything, creates every instance (compactly) and shuffles them globally, as the
    original does; memory grows with the corpus (see the streaming mode for corpora that do not
    fit). Returns a `Summary`.
    """
    options.validate()
    vocab_ids = VocabIds.from_vocab(tokenizer.vocab)
    summary = Summary(options=options)
    with record_writers(output_files, gzip=gzip) as writers:
        reading = Progress("read+tokenize", unit="lines", secondary_unit="tokens",
                           interval=progress_interval)
        corpus = read_corpus(input_files, tokenizer, processes, progress=reading)
        check_documents(corpus.num_documents, input_files)
        reading.summary(documents=corpus.num_documents, tokens=corpus.num_tokens)
        summary.documents = corpus.num_documents
        summary.input_tokens = corpus.num_tokens

        creating = Progress("create_instances", total=corpus.num_documents * options.dupe_factor,
                            unit="documents", secondary_unit="instances",
                            interval=progress_interval)
        instances = create_instances(corpus, random.Random(random_seed), options, vocab_ids,
                                     progress=creating)
        creating.summary(instances=len(instances))

        rows = make_rows(instances, options)
        writing = Progress("write", total=len(rows), unit="records", interval=progress_interval)
        write_instances(instances, corpus, options, vocab_ids, writers, summary, progress=writing,
                        rows=rows)
        writing.summary()
        for writer in writers:
            summary.records_per_file[writer.path] = writer.num_records
    return summary


def default_processes(input_files, min_bytes=4_000_000):
    """Tokenization processes for the default mode: one per CPU for inputs of 4 MB or more."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:
        cpus = os.cpu_count() or 1
    size = sum(os.path.getsize(p) for p in input_files if "://" not in p and os.path.isfile(p))
    return cpus if size >= min_bytes else 1


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


# ---------------------------------------------------------------------------------------------
# Streaming, parallel mode
# ---------------------------------------------------------------------------------------------


def load_compiled_functions():
    """Loads (compiling if not cached yet) every compiled function, on a two-document corpus."""
    corpus = Corpus(np.arange(5, 11, dtype=np.int32), np.array([0, 2, 4, 6], np.int64),
                    np.array([0, 2, 3], np.int64))
    vocab_ids = VocabIds({}, 0, 1, 2, np.arange(12, dtype=np.int32), np.zeros(12, np.bool_))
    options = InstanceOptions(max_seq_length=8, dupe_factor=1)
    for layout in (options, dataclasses.replace(options, masking="dynamic", objective="mlm",
                                                 pack_sequences=True)):
        instances = create_instances(corpus, random.Random(0), layout, vocab_ids)
        rows = make_rows(instances, layout)
        serialize_rows(instances, corpus, layout, vocab_ids, rows, np.arange(len(rows)))


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


class WindowProcessor:
    """One streaming window to its records: tokenize its lines, create instances with
    `random.Random(random_seed + index)` exactly as the default mode does for a whole corpus,
    and serialize them grouped by output file. Everything it uses is on the object (no module
    state): the streaming mode calls it in worker processes, the Beam pipeline
    (`bert_tf.tasks.pretraining.beam`) in its DoFn.

    Calling it with (index, lines) returns (documents, input tokens, records, groups, stats):
    groups[j] = (framed TFRecord bytes, count) holds the records whose index k in the window's
    output order has k % num_outputs == j; stats = (instance tokens, masked, random next,
    instances). Records are rows (`make_rows`): packing, if any, stays within a window.
    """

    def __init__(self, tokenizer, options, random_seed, num_outputs):
        self.tokenizer = tokenizer
        self.options = options
        self.vocab_ids = VocabIds.from_vocab(tokenizer.vocab)
        self.random_seed = random_seed
        self.num_outputs = num_outputs

    def __call__(self, index, lines):
        builder = CorpusBuilder()
        builder.add(*tokenize_lines(self.tokenizer, self.tokenizer.vocab, lines))
        corpus = builder.build()
        instances = create_instances(corpus, random.Random(self.random_seed + index),
                                     self.options, self.vocab_ids)
        rows = make_rows(instances, self.options)
        groups = []
        stats = np.zeros(4, np.int64)
        for j in range(self.num_outputs):
            row_ids = np.arange(j, len(rows), self.num_outputs)
            data, _, group_stats = serialize_rows(instances, corpus, self.options,
                                                  self.vocab_ids, rows, row_ids)
            groups.append((data.tobytes(), len(row_ids)))  # bytes unpickle without a copy
            stats += group_stats
        return (corpus.num_documents, corpus.num_tokens, len(rows), groups,
                tuple(stats.tolist()))


def _process_window(item):
    return _WORKER["processor"](*item)


def create_pretraining_data_streaming(input_files, output_files, tokenizer, options,
                                      random_seed=12345, num_workers=1, window_bytes=2_000_000,
                                      gzip=False, progress_interval=10.0):
    """Streaming mode: bounded memory, parallel workers, one output file per shard.

    The input (files in order, as one stream of lines) is cut into windows of consecutive whole
    documents of about `window_bytes` bytes of text (`iter_windows`). Window w (0, 1, ...) is
    processed exactly like the default mode processes the whole corpus, with
    `random.Random(random_seed + w)`: its documents are shuffled, each is turned into instances
    `dupe_factor` times, random-next segments are drawn from documents *of the same window*, and
    the window's instances are shuffled. Records then go round-robin over the output files in
    window order, continuing across windows: record k of the whole stream goes to file
    k % len(output_files).

    So each output file is a deterministic function of the inputs, vocabulary, flags, seed,
    `window_bytes` and the number of output files; the number of workers only changes the
    speed. (With one window holding the whole corpus this is exactly the default mode.)
    Memory is bounded by about (num_workers + 1) windows' text and records, whatever the corpus
    size. Returns a `Summary`.
    """
    options.validate()
    if window_bytes < 1:
        raise argument_error("window_bytes", f"must be positive, got {window_bytes}")
    state = {"processor": WindowProcessor(tokenizer, options, random_seed, len(output_files))}
    if num_workers > 1:
        load_compiled_functions()  # once here: forked workers inherit them
    summary = Summary(options=options)
    progress = Progress("create_pretraining_data", unit="documents", secondary_unit="records",
                        interval=progress_interval)
    num_outputs = len(output_files)
    with record_writers(output_files, gzip=gzip) as writers:
        windows = enumerate(iter_windows(input_files, window_bytes))
        written = 0
        for num_docs, num_tokens, num_records, groups, stats in ordered_map(
                _process_window, windows, num_workers, state, max_in_flight=num_workers + 1):
            summary.documents += num_docs
            summary.input_tokens += num_tokens
            summary.records += num_records
            summary.add_records(stats)
            # Record k of the window is record written + k of the stream: file
            # (written + k) % num_outputs, the same for the whole group k % num_outputs.
            for j, (data, count) in enumerate(groups):
                if count:
                    writers[(written + j) % num_outputs].write(data, count)
            written += num_records
            progress.update(num_docs, secondary=num_records, instances=summary.instances)
        check_documents(summary.documents, input_files)
        for writer in writers:
            summary.records_per_file[writer.path] = writer.num_records
    progress.summary(instances=summary.instances)
    return summary
