"""The original's create_training_instances on token ids, compiled: documents cut into
sentence-pair (or single-span) instances and masked (`create_instances`), with the original's
draws on its `random.Random`, kept compactly as `Instances`; or cut into full windows
(`InstanceOptions.full_windows`); and which input tokens the instances hold
(`tokens_in_instances`).
"""
import numpy as np
from numba import njit

from bert_tf.data.pretraining.python_random import (
    randbelow, random_float, rng_state, set_rng_state, shuffle, shuffled_range)


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
    shuffle(mt, group_order[:num_groups])

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
            if random_float(mt) < 0.8:  # 80%: [MASK]
                replacement = mask_id
            elif random_float(mt) < 0.5:  # 10%: keep the original
                replacement = seq[index]
            else:  # 10%: a random vocabulary word
                replacement = word_ids[randbelow(mt, len(word_ids))]
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
            if random_float(mt) < short_seq_prob:
                target_seq_length = 2 + randbelow(mt, max_num_tokens - 1)
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
                        if random_float(mt) < 0.5:
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
                        a_end = 1 + randbelow(mt, chunk_len - 1)
                    c0 = first_seg + chunk_first
                    a_start = seg_bounds[c0]
                    a_len = seg_bounds[c0 + a_end] - a_start
                    if chunk_len == 1 or random_float(mt) < 0.5:
                        is_random_next = 1
                        target_b_length = target_seq_length - a_len
                        random_doc_index = 0
                        for _ in range(10):
                            random_doc_index = randbelow(mt, num_docs)
                            if random_doc_index != doc_index:
                                break
                        rdoc = doc_order[random_doc_index]
                        r_first = doc_bounds[rdoc]
                        r_num = doc_bounds[rdoc + 1] - r_first
                        random_start = randbelow(mt, r_num)
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
                            if random_float(mt) < 0.5:
                                a_start += 1
                            a_len -= 1
                        else:
                            if random_float(mt) < 0.5:
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


def create_instances(corpus, rng, options, vocab_ids, progress=None, instances_per_call=1 << 15):
    """The original's create_training_instances after reading: returns `Instances`.

    Makes exactly the original's calls on `rng` (a `random.Random`, advanced in place): shuffle
    the documents, then for each dupe and document the instance draws, then shuffle the
    instances (their output order is `Instances.order`). With `options.full_windows`, full
    windows instead (`create_window_instances`).
    """
    if options.full_windows:
        return create_window_instances(corpus, rng, options, vocab_ids, progress,
                                       instances_per_call)
    mt = rng_state(rng)
    num_docs = corpus.num_documents
    doc_order = shuffled_range(mt, num_docs)
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
    instances.order = shuffled_range(mt, instances.size)
    set_rng_state(rng, mt)
    return instances


def window_spans(corpus, window):
    """Full windows of `window` tokens: (start, length) int64 arrays, each document's tokens
    cut into consecutive windows, the last of a document shorter; documents in corpus order."""
    doc_start = corpus.seg_bounds[corpus.doc_bounds[:-1]]
    doc_end = corpus.seg_bounds[corpus.doc_bounds[1:]]
    count = -(-(doc_end - doc_start) // window)
    first = np.cumsum(count) - count  # each document's first window
    within = np.arange(int(count.sum()), dtype=np.int64) - np.repeat(first, count)
    starts = np.repeat(doc_start, count) + within * window
    lengths = np.minimum(np.repeat(doc_end, count) - starts, window)
    return starts, lengths


@njit(cache=True, nogil=True)
def _mask_windows(mt, tokens, a_start, a_len, first, stop, max_seq_length, masked_lm_prob,
                  max_predictions_per_seq, word_ids, is_subword, do_whole_word_mask, cls_id,
                  sep_id, mask_id, nmask_out, mpos_out, mrep_out):
    """Static masks of instances first..stop-1, [CLS] window [SEP], in that order, by the
    original's masking (`_mask_instance`)."""
    seq = np.empty(max_seq_length, np.int32)
    cand_pos = np.empty(max_seq_length, np.int64)
    group_start = np.empty(max_seq_length + 1, np.int64)
    group_order = np.empty(max_seq_length, np.int64)
    covered = np.empty(max_seq_length, np.bool_)
    for n in range(first, stop):
        start = a_start[n]
        length = np.int64(a_len[n])
        seq[0] = cls_id
        seq[1:1 + length] = tokens[start:start + length]
        seq[1 + length] = sep_id
        nmask_out[n] = _mask_instance(
            mt, seq, length + 2, masked_lm_prob, max_predictions_per_seq, word_ids, is_subword,
            do_whole_word_mask, cls_id, sep_id, mask_id, cand_pos, group_start, group_order,
            covered, mpos_out[n], mrep_out[n])


def create_window_instances(corpus, rng, options, vocab_ids, progress=None,
                            instances_per_call=1 << 15):
    """Full windows (`options.full_windows`): returns `Instances`, [CLS] window [SEP] each
    (`window_spans` of max_seq_length - 2 tokens), `dupe_factor` times over.

    Draws on `rng` (advanced in place): with static masks, the masks of each instance in
    creation order (dupe, then document, then window), then the shuffle of the instances
    (`Instances.order`), both as the original draws them; no document shuffle, no target
    length.
    """
    mt = rng_state(rng)
    starts, lengths = window_spans(corpus, options.max_seq_length - 2)
    per_dupe = len(starts)
    total = per_dupe * options.dupe_factor
    instances = Instances(options.max_predictions_per_seq, total)
    instances.a_start[:] = np.tile(starts, options.dupe_factor)
    instances.a_len[:] = np.tile(lengths, options.dupe_factor)
    instances.size = total
    # Windows before the end of each document, for progress in documents.
    doc_ends = np.cumsum(-(-np.diff(corpus.seg_bounds[corpus.doc_bounds]) //
                           (options.max_seq_length - 2)))
    done = 0
    for first in range(0, total, instances_per_call):
        stop = min(first + instances_per_call, total)
        if options.masking == "static":
            _mask_windows(mt, corpus.tokens, instances.a_start, instances.a_len, first, stop,
                          options.max_seq_length, options.masked_lm_prob,
                          options.max_predictions_per_seq, vocab_ids.word_ids,
                          vocab_ids.is_subword, options.do_whole_word_mask, vocab_ids.cls_id,
                          vocab_ids.sep_id, vocab_ids.mask_id, instances.num_masked,
                          instances.masked_positions, instances.masked_replacements)
        if progress is not None:
            dupe, window = divmod(stop, per_dupe)
            documents = (dupe * corpus.num_documents
                         + int(np.searchsorted(doc_ends, window, side="right")))
            progress.update(documents - done, secondary=stop - first)
            done = documents
    instances.order = shuffled_range(mt, total)
    set_rng_state(rng, mt)
    return instances


def tokens_in_instances(instances, corpus):
    """How many input tokens of `corpus` are in at least one instance: the union of the
    instances' A and B spans over the token positions (merged intervals: memory grows with the
    instances, not the tokens), less the separators in it (`Corpus.separators`)."""
    n = instances.size
    starts = np.concatenate([instances.a_start[:n], instances.b_start[:n]])
    ends = starts + np.concatenate([instances.a_len[:n], instances.b_len[:n]]).astype(np.int64)
    nonempty = ends > starts
    starts, ends = starts[nonempty], ends[nonempty]
    if len(starts) == 0:
        return 0
    order = np.argsort(starts, kind="stable")
    starts = starts[order]
    ends = np.maximum.accumulate(ends[order])  # the furthest end so far
    opens = np.flatnonzero(np.concatenate([[True], starts[1:] > ends[:-1]]))
    union_starts = starts[opens]
    union_ends = ends[np.append(opens[1:] - 1, len(starts) - 1)]
    covered = int((union_ends - union_starts).sum())
    if corpus.separators is not None and len(corpus.separators):
        k = np.searchsorted(union_starts, corpus.separators, side="right") - 1
        inside = (k >= 0) & (corpus.separators < union_ends[np.maximum(k, 0)])
        covered -= int(inside.sum())
    return covered
