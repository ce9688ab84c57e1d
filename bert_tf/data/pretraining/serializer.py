"""Pretraining records serialized by hand, compiled: each row's features (`PRETRAINING_FEATURES`
of the options' layout) as the bytes of `tf.train.Example.SerializeToString(deterministic=True)`,
framed as TFRecords. The original's layout gives the original's records, byte for byte.
"""
import functools

import numpy as np
from numba import njit

from bert_tf.data.pretraining.record_layout import PRETRAINING_FEATURES
from bert_tf.data.pretraining.wire_format import (
    CRC_TABLES, crc32c, feature_sizes, masked_crc, put_feature_header, put_u32, put_varint,
    start_record, varint_size)
from bert_tf.data.schema import FLOAT32

# Example{features: Features{feature: map<string, Feature>}} in the wire format of
# SerializeToString(deterministic=True): map entries sorted by key, each `key = 1` then
# `value = 2`; Int64List/FloatList values packed (no list here is empty: max_seq_length >= 5,
# max_predictions_per_seq >= 1).
_WIRE_FEATURES = sorted(PRETRAINING_FEATURES, key=lambda feature: feature.name)
_KEY_BYTES = np.frombuffer("".join(f.name for f in _WIRE_FEATURES).encode(), np.uint8)
_KEY_OFFSETS = np.cumsum([0] + [len(f.name) for f in _WIRE_FEATURES]).astype(np.int64)
_IS_FLOAT = np.array([f.dtype == FLOAT32 for f in _WIRE_FEATURES], np.bool_)
_WIRE_INDEX = {feature.name: index for index, feature in enumerate(_WIRE_FEATURES)}
# The row of `values` (wire order) of each feature the compiled code fills, in the order it
# unpacks them (an argument, not a compiled-in constant: numba's cache keys on this file only).
_FEATURE_ROWS = tuple(_WIRE_INDEX[name] for name in (
    "input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids",
    "masked_lm_weights", "masked_lm_candidates", "position_ids", "sequence_ids",
    "next_sentence_labels", "next_sentence_positions", "next_sentence_weights"))


@njit(cache=True, nogil=True)
def _serialize_rows(row_ids, bounds, members, tokens, a_start, a_len, b_start, b_len,
                    is_random_next, num_masked, masked_positions, masked_replacements, cls_id,
                    sep_id, is_subword, do_whole_word_mask, two_segments, feature_rows, present,
                    lengths, is_float, key_bytes, key_offsets, crc_tables, bound):
    """TFRecord-framed serialized Examples of rows `row_ids`: row r holds instances
    members[bounds[r]:bounds[r+1]]; feature f (wire order) is written if present[f], with
    lengths[f] values.

    Returns (bytes as a uint8 array, record end offsets, real tokens, masked tokens, random
    next, sequences).
    """
    (ids_row, mask_row, segments_row, positions_row, labels_row, weights_row, candidates_row,
     position_ids_row, sequence_ids_row, nsp_labels_row, nsp_positions_row,
     nsp_weights_row) = feature_rows
    with_candidates = present[candidates_row]
    with_sequences = present[sequence_ids_row]
    with_nsp_labels = present[nsp_labels_row]
    with_nsp_slots = present[nsp_positions_row]
    num_features = len(present)
    width = 1
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
        for f in range(num_features):
            if present[f]:
                values[f, :lengths[f]] = 0
        offset = 0
        num_labels = 0
        for s in range(bounds[row + 1] - bounds[row]):
            i = members[bounds[row] + s]
            la = np.int64(a_len[i])
            lb = np.int64(b_len[i])
            # [CLS] A [SEP] (B [SEP])
            values[ids_row, offset] = cls_id
            values[ids_row, offset + 1:offset + 1 + la] = tokens[a_start[i]:a_start[i] + la]
            values[ids_row, offset + 1 + la] = sep_id
            length = la + 2
            if two_segments:
                values[ids_row, offset + 2 + la:offset + 2 + la + lb] = (
                    tokens[b_start[i]:b_start[i] + lb])
                values[ids_row, offset + 2 + la + lb] = sep_id
                length += lb + 1
                values[segments_row, offset + 2 + la:offset + length] = 1
            values[mask_row, offset:offset + length] = 1
            if with_sequences:
                for k in range(length):
                    values[position_ids_row, offset + k] = k
                values[sequence_ids_row, offset:offset + length] = s + 1
            if with_candidates:
                # 0 [CLS]/[SEP], 2 a "##" piece right after a candidate (with whole-word
                # masking), else 1.
                for k in range(length):
                    token = values[ids_row, offset + k]
                    if token == cls_id or token == sep_id:
                        continue
                    if (do_whole_word_mask and k > 0
                            and values[candidates_row, offset + k - 1] != 0
                            and is_subword[token]):
                        values[candidates_row, offset + k] = 2
                    else:
                        values[candidates_row, offset + k] = 1
            nm = np.int64(num_masked[i])
            for k in range(nm):
                position = offset + np.int64(masked_positions[i, k])
                values[positions_row, num_labels] = position
                values[labels_row, num_labels] = values[ids_row, position]  # before masking
                values[weights_row, num_labels] = 1
                values[ids_row, position] = masked_replacements[i, k]
                num_labels += 1
            if with_nsp_labels:
                values[nsp_labels_row, s] = is_random_next[i]
            if with_nsp_slots:
                values[nsp_positions_row, s] = offset
                values[nsp_weights_row, s] = 1
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
                payload = lengths[f]  # a byte each, and more for values of 128 or more
                for k in range(lengths[f]):
                    if values[f, k] >= 128:
                        payload += varint_size(values[f, k]) - 1
                payloads[f] = payload
            entry = feature_sizes(key_len[f], payloads[f])[0]
            features_size += 1 + varint_size(entry) + entry
        data_start = p = start_record(buf, p, features_size, crc_tables)
        p = put_varint(buf, p + 1, features_size)
        for f in range(num_features):
            if not present[f]:
                continue
            p = put_feature_header(buf, p, key_bytes, key_offsets, f, payloads[f], is_float[f])
            if is_float[f]:  # 1.0 (float32 0x3F800000, little-endian) or 0.0
                for k in range(lengths[f]):
                    p = put_u32(buf, p, 0x3F800000 if values[f, k] else 0)
            elif payloads[f] == lengths[f]:  # every value a one-byte varint
                buf[p:p + lengths[f]] = values[f, :lengths[f]]
                p += lengths[f]
            else:
                for k in range(lengths[f]):
                    p = put_varint(buf, p, values[f, k])
        p = put_u32(buf, p, masked_crc(crc32c(crc_tables, buf, data_start, p)))
        ends[r] = p
    return buf[:p], ends, total_tokens, total_masked, total_random, total_sequences


@functools.lru_cache(maxsize=None)
def _written_features(options):
    """(present, lengths) of the wire-order features for `options`, and a record's bound in
    bytes (ints are non-negative and below 2**35: 5 bytes at most as varints; a feature's
    header holds its key and at most 18 bytes more)."""
    layout = options.layout
    present = np.array([f.present(layout) for f in _WIRE_FEATURES], np.bool_)
    lengths = np.array([f.size(options.max_seq_length, options.max_predictions_per_seq, layout)
                        if f.present(layout) else 0 for f in _WIRE_FEATURES], np.int64)
    bound = 22 + int(sum(18 + len(f.name) + (4 if f.dtype == FLOAT32 else 5) * n
                         for f, n in zip(_WIRE_FEATURES, lengths) if n))
    return present, lengths, bound


def serialize_rows(instances, corpus, options, vocab_ids, rows, row_ids):
    """TFRecord-framed records of rows `row_ids` of `rows`: (bytes, record end offsets,
    stats), stats = (real tokens, masked tokens, random-next instances, instances)."""
    row_ids = np.ascontiguousarray(row_ids, dtype=np.int64)
    bounds, members = rows.bounds, rows.members
    if bounds is None:  # one instance a row
        members = members[row_ids]
        bounds = np.arange(len(members) + 1, dtype=np.int64)
        row_ids = np.arange(len(members), dtype=np.int64)
    present, lengths, bound = _written_features(options)
    buf, ends, num_tokens, num_masked, num_random, num_sequences = _serialize_rows(
        row_ids, bounds, members, corpus.tokens, *instances.arrays(),
        vocab_ids.cls_id, vocab_ids.sep_id, vocab_ids.is_subword, options.do_whole_word_mask,
        options.next_sentence, _FEATURE_ROWS, present, lengths, _IS_FLOAT, _KEY_BYTES,
        _KEY_OFFSETS, CRC_TABLES, bound)
    return buf, ends, (int(num_tokens), int(num_masked), int(num_random), int(num_sequences))
