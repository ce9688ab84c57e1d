"""The TFRecord and tf.train.Example wire formats, compiled: TFRecord framing with its masked
CRC-32C, protobuf varints and a feature map entry's header. `serializer` writes records with
them.
"""
import numpy as np
from numba import njit


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


CRC_TABLES = _crc32c_tables()


@njit(cache=True, nogil=True)
def crc32c(tables, buf, start, stop):
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
def masked_crc(crc):
    """TFRecord's masked CRC: rotate right by 15 bits and add a constant."""
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


@njit(cache=True, nogil=True)
def varint_size(v):
    n = 1
    while v >= 128:
        v >>= 7
        n += 1
    return n


@njit(cache=True, nogil=True)
def put_varint(buf, p, v):
    while v >= 128:
        buf[p] = (v & 127) | 128
        v >>= 7
        p += 1
    buf[p] = v
    return p + 1


@njit(cache=True, nogil=True)
def put_u32(buf, p, v):
    buf[p] = v & 0xFF
    buf[p + 1] = (v >> 8) & 0xFF
    buf[p + 2] = (v >> 16) & 0xFF
    buf[p + 3] = (v >> 24) & 0xFF
    return p + 4


@njit(cache=True, nogil=True)
def start_record(buf, p, features_size, crc_tables):
    """Writes a TFRecord's framing (uint64 length of the Example, masked CRC of the length) and
    the Example's first byte (field 1, `features`) at p; returns the position of that byte,
    where the data (and its CRC, written after it) starts."""
    example_size = 1 + varint_size(features_size) + features_size
    for k in range(8):
        buf[p + k] = (example_size >> (8 * k)) & 0xFF
    start = put_u32(buf, p + 8, masked_crc(crc32c(crc_tables, buf, p, p + 8)))
    buf[start] = 0x0A  # Example.features
    return start


@njit(cache=True, nogil=True)
def feature_sizes(key_len, payload):
    """(map entry size, Feature size, list message size) for a non-empty packed payload."""
    list_message = 1 + varint_size(payload) + payload
    feature = 1 + varint_size(list_message) + list_message
    entry = 1 + varint_size(key_len) + key_len + 1 + varint_size(feature) + feature
    return entry, feature, list_message


@njit(cache=True, nogil=True)
def put_feature_header(buf, p, key_bytes, key_offsets, f, payload, is_float):
    """Writes map entry f up to its packed payload (which the caller writes next)."""
    key_len = key_offsets[f + 1] - key_offsets[f]
    entry, feature, list_message = feature_sizes(key_len, payload)
    buf[p] = 0x0A  # Features.feature: a map entry
    p = put_varint(buf, p + 1, entry)
    buf[p] = 0x0A  # entry key
    p = put_varint(buf, p + 1, key_len)
    buf[p:p + key_len] = key_bytes[key_offsets[f]:key_offsets[f + 1]]
    p += key_len
    buf[p] = 0x12  # entry value: Feature
    p = put_varint(buf, p + 1, feature)
    buf[p] = 0x12 if is_float else 0x1A  # Feature.float_list / Feature.int64_list
    p = put_varint(buf, p + 1, list_message)
    buf[p] = 0x0A  # packed values
    return put_varint(buf, p + 1, payload)
