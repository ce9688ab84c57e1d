"""Instances into rows, the records' units: one instance a row, or several packed into rows of
max_seq_length tokens (best-fit decreasing, compiled, no random draw).
"""
import dataclasses

import numpy as np
from numba import njit


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
