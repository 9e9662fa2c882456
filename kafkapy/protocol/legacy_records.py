"""Legacy message sets (magic 0 and 1) and their conversion to and from v2 batches.

Clients older than Kafka 0.11 produce and fetch message sets instead of record
batches: [offset int64][size int32][crc uint32][magic int8][attributes int8]
[timestamp int64, magic 1 only][key bytes][value bytes], repeated. The CRC is
plain CRC32 over magic..end. A compressed message ("wrapper") carries a whole
inner message set as its value; with magic 1 the inner offsets are relative
(0..n-1) and the wrapper holds the absolute offset of the last inner message.

The broker stores v2 only: Produce v0-v2 message sets go through `legacy_to_v2`,
Fetch v0-v3 responses through `v2_to_legacy`, following Kafka's LogValidator
and RecordsUtil.downConvert.
"""
from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from .compression import (
    DEFAULT_MAX_DECOMPRESSED_SIZE, NONE, ZSTD, UnsupportedCompressionTypeError, compress, decompress,
)
from .errors import CorruptRecordError
from .records import (
    COMPRESSION_MASK, NO_TIMESTAMP, TIMESTAMP_TYPE_MASK, build_batch, iter_batch_headers, iter_records,
)

MAGIC_V0 = 0
MAGIC_V1 = 1

LOG_OVERHEAD = 12  # offset + size
CRC_POS = 12
MAGIC_POS = 16
ATTRIBUTES_POS = 17
TIMESTAMP_POS = 18
# Smallest message body (crc .. value length) per magic: Kafka's RECORD_OVERHEAD_V0/V1.
RECORD_OVERHEAD = (14, 22)
_KEY_POS = (18, 26)

_HEADER_V0 = struct.Struct(">qiIbb")
_HEADER_V1 = struct.Struct(">qiIbbq")
_OFFSET_SIZE = struct.Struct(">qi")
_I = struct.Struct(">i")
_Q = struct.Struct(">q")
_U = struct.Struct(">I")


@dataclass(slots=True)
class LegacyMessage:
    """One magic 0/1 message.

    From `iter_message_set` this is a top-level entry (a wrapper keeps its
    compressed value); from `iter_legacy_records` it is a decompressed inner or
    plain message with its absolute offset and effective timestamp, and
    `compression` names the codec of the wrapper it came from (0 if none).
    """

    offset: int
    timestamp: int  # NO_TIMESTAMP (-1) for magic 0
    key: bytes | None
    value: bytes | None
    magic: int
    compression: int = NONE
    timestamp_type: int = 0  # 1 = LogAppendTime (magic 1 only)

    @property
    def attributes(self) -> int:
        return self.compression | (TIMESTAMP_TYPE_MASK if self.timestamp_type else 0)


def iter_message_set(buf, pos: int = 0, end: int | None = None) -> Iterator[LegacyMessage]:
    """Yield the top-level messages of a message set, each CRC-checked; wrappers stay closed."""
    view = memoryview(buf)
    if end is None:
        end = len(view)
    while pos < end:
        if end - pos < LOG_OVERHEAD + 5:
            raise CorruptRecordError(f"legacy message truncated at byte {pos}")
        offset, size = _OFFSET_SIZE.unpack_from(view, pos)
        magic = view[pos + MAGIC_POS]
        if magic > 1:
            raise CorruptRecordError(f"legacy message at byte {pos} has magic {magic}")
        if size < RECORD_OVERHEAD[magic]:
            raise CorruptRecordError(f"legacy message at byte {pos} has impossible size {size}")
        msg_end = pos + LOG_OVERHEAD + size
        if msg_end > end:
            raise CorruptRecordError(f"legacy message at byte {pos} runs past the end of the message set")
        (crc,) = _U.unpack_from(view, pos + CRC_POS)
        if zlib.crc32(view[pos + MAGIC_POS : msg_end]) != crc:
            raise CorruptRecordError(f"legacy message CRC mismatch at byte {pos}")
        attributes = view[pos + ATTRIBUTES_POS]
        timestamp = _Q.unpack_from(view, pos + TIMESTAMP_POS)[0] if magic else NO_TIMESTAMP
        field_pos = pos + _KEY_POS[magic]
        key, field_pos = _read_bytes(view, field_pos, msg_end)
        value, field_pos = _read_bytes(view, field_pos, msg_end)
        if field_pos != msg_end:
            raise CorruptRecordError(
                f"legacy message at byte {pos} declares {size} bytes but its fields end at {field_pos - pos - LOG_OVERHEAD}")
        timestamp_type = 1 if magic and attributes & TIMESTAMP_TYPE_MASK else 0
        yield LegacyMessage(offset, timestamp, key, value, magic, attributes & COMPRESSION_MASK, timestamp_type)
        pos = msg_end


def _read_bytes(view, pos: int, end: int) -> tuple[bytes | None, int]:
    if end - pos < 4:
        raise CorruptRecordError(f"legacy message field length truncated at byte {pos}")
    (size,) = _I.unpack_from(view, pos)
    pos += 4
    if size < 0:
        return None, pos
    if size > end - pos:
        raise CorruptRecordError(f"legacy message field of {size} bytes overruns its message at byte {pos}")
    return bytes(view[pos : pos + size]), pos + size


def iter_legacy_records(buf, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> Iterator[LegacyMessage]:
    """Yield every message of a message set with wrappers opened, offsets made absolute.

    Inner messages of a LogAppendTime wrapper take the wrapper's timestamp.
    `max_size` caps each wrapper's decompressed size.
    """
    for message in iter_message_set(buf):
        codec = message.compression
        if codec == NONE:
            yield message
            continue
        if codec == ZSTD:
            raise UnsupportedCompressionTypeError("zstd compression requires magic 2 record batches")
        if message.value is None:
            raise CorruptRecordError(f"compressed legacy message at offset {message.offset} has a null value")
        data = decompress(codec, message.value, max_size, legacy_lz4_checksum=message.magic == MAGIC_V0)
        inner = list(iter_message_set(data))
        if not inner:
            raise CorruptRecordError(f"compressed legacy message at offset {message.offset} holds no messages")
        # Kafka's DeepRecordsIterator: magic 1 inner offsets are relative unless that would
        # make them negative (a producer that left the wrapper offset at 0), then taken as is.
        base = message.offset - inner[-1].offset if message.magic == MAGIC_V1 else -1
        for msg in inner:
            if msg.compression != NONE:
                raise CorruptRecordError(f"legacy message at offset {message.offset} is compressed twice")
            if base >= 0:
                msg.offset += base
            msg.compression = codec
            if msg.magic == MAGIC_V1:
                # Inner messages take the wrapper's timestamp type, and its timestamp if LogAppendTime.
                msg.timestamp_type = message.timestamp_type
                if message.timestamp_type:
                    msg.timestamp = message.timestamp
            yield msg


def encode_message(offset: int, magic: int, attributes: int, timestamp: int, key: bytes | None,
                   value: bytes | None) -> bytes:
    """Encode one message with its offset/size prefix and CRC."""
    body = bytearray()
    for part in (key, value):
        if part is None:
            body += b"\xff\xff\xff\xff"
        else:
            body += _I.pack(len(part))
            body += part
    if magic == MAGIC_V0:
        head = _HEADER_V0.pack(offset, _HEADER_V0.size - LOG_OVERHEAD + len(body), 0, 0, attributes)
    elif magic == MAGIC_V1:
        head = _HEADER_V1.pack(offset, _HEADER_V1.size - LOG_OVERHEAD + len(body), 0, 1, attributes, timestamp)
    else:
        raise ValueError(f"legacy magic must be 0 or 1, not {magic}")
    out = bytearray(head) + body
    _U.pack_into(out, CRC_POS, zlib.crc32(memoryview(out)[MAGIC_POS:]))
    return bytes(out)


def build_message_set(records: Iterable, magic: int, *, compression: int = NONE, base_offset: int = 0,
                      timestamp_type: int = 0, log_append_time: int | None = None) -> bytes:
    """Encode messages as a magic 0/1 message set, in one wrapper if `compression` is set.

    `records` are (key, value[, timestamp]) tuples at consecutive offsets from
    `base_offset`, or objects with offset/timestamp/key/value attributes (Record,
    LegacyMessage) that keep their own offsets. Like Kafka's MemoryRecordsBuilder:
    magic 1 inner offsets are relative to the first message and LogAppendTime
    gives every message `log_append_time`; magic 0 drops timestamps.
    """
    if compression == ZSTD:
        raise UnsupportedCompressionTypeError("zstd compression requires magic 2 record batches")
    if magic == MAGIC_V0:
        timestamp_type = 0
    messages = []
    for i, rec in enumerate(records):
        if isinstance(rec, tuple):
            key, value = rec[0], rec[1]
            timestamp = rec[2] if len(rec) > 2 and rec[2] is not None else NO_TIMESTAMP
            offset = base_offset + i
        else:
            key, value, timestamp, offset = rec.key, rec.value, rec.timestamp, rec.offset
        if magic == MAGIC_V0:
            timestamp = NO_TIMESTAMP
        elif timestamp_type:
            timestamp = log_append_time if log_append_time is not None else timestamp
        messages.append((offset, timestamp, key, value))
    if not messages:
        return b""
    type_bit = TIMESTAMP_TYPE_MASK if timestamp_type else 0
    if compression == NONE:
        return b"".join(encode_message(offset, magic, type_bit, ts, key, value)
                        for offset, ts, key, value in messages)
    first_offset = messages[0][0]
    inner = b"".join(
        encode_message(offset if magic == MAGIC_V0 else offset - first_offset, magic, type_bit, ts, key, value)
        for offset, ts, key, value in messages)
    wrapped = compress(compression, inner, legacy_lz4_checksum=magic == MAGIC_V0)
    if magic == MAGIC_V0:
        wrapper_ts = NO_TIMESTAMP
    elif timestamp_type and log_append_time is not None:
        wrapper_ts = log_append_time
    else:
        wrapper_ts = max(ts for _, ts, _, _ in messages)
    return encode_message(messages[-1][0], magic, compression | type_bit, wrapper_ts, None, wrapped)


def legacy_to_v2(message_set, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> bytes:
    """Convert a produced magic 0/1 message set into one v2 batch (b"" if it is empty).

    As Kafka's LogValidator does for old producers: all messages go into one
    CreateTime batch at offset deltas 0..n-1, compressed with the set's codec
    (the last compressed wrapper's); magic 0 messages get timestamp -1.
    """
    codec = NONE
    records = []
    for message in iter_legacy_records(message_set, max_size):
        if message.compression:
            codec = message.compression
        records.append((message.key, message.value, (), message.timestamp))
    if not records:
        return b""
    return build_batch(records, base_offset=0, base_timestamp=records[0][3], compression=codec)


def v2_to_legacy(batches, magic: int, first_offset: int = 0,
                 max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE, size_limit: int | None = None) -> bytes:
    """Down-convert v2 batches to a magic 0/1 message set for Fetch v0-v3.

    Like Kafka's RecordsUtil.downConvert: control batches are dropped, headers
    are lost, each compressed batch becomes one wrapper with the same codec
    (zstd raises UnsupportedCompressionTypeError, as Kafka answers old fetches),
    records before `first_offset` in uncompressed batches are skipped, and
    magic 1 keeps the batch's timestamp type.

    With `size_limit`, the answer is bounded as Kafka's LazyDownConversionRecords
    bounds a Fetch v0-3 answer: at most max(size_limit, the first converted
    batch) bytes, here cut at a whole top-level message; conversion stops there.
    """
    if magic not in (MAGIC_V0, MAGIC_V1):
        raise ValueError(f"legacy magic must be 0 or 1, not {magic}")
    parts = []
    converted = 0
    for header in iter_batch_headers(batches, validate=False):
        if header.is_control:
            continue
        codec = header.compression
        if codec == ZSTD:
            raise UnsupportedCompressionTypeError(
                "zstd-compressed batches cannot be down-converted for fetch versions below 10")
        records = list(iter_records(batches, header, max_size))
        if codec == NONE:
            records = [r for r in records if r.offset >= first_offset]
        if not records:
            continue
        timestamp_type = header.timestamp_type if magic == MAGIC_V1 else 0
        log_append_time = header.max_timestamp if timestamp_type else None
        parts.append(build_message_set(records, magic, compression=codec, timestamp_type=timestamp_type,
                                       log_append_time=log_append_time))
        if size_limit is not None:
            if len(parts) == 1:
                size_limit = max(size_limit, len(parts[0]))
            converted += len(parts[-1])
            if converted >= size_limit:
                break
    if size_limit is None:
        return b"".join(parts)
    return truncate_message_set(b"".join(parts), size_limit)


def truncate_message_set(buf: bytes, limit: int) -> bytes:
    """The longest prefix of whole top-level messages within `limit` bytes, but at least the first."""
    pos = 0
    end = len(buf)
    while pos + LOG_OVERHEAD <= end:
        next_pos = pos + LOG_OVERHEAD + _I.unpack_from(buf, pos + 8)[0]
        if next_pos > limit and pos > 0:
            break
        pos = next_pos
    return buf if pos >= end else buf[:pos]


__all__ = [
    "MAGIC_V0", "MAGIC_V1", "LegacyMessage", "iter_message_set", "iter_legacy_records", "encode_message",
    "build_message_set", "legacy_to_v2", "v2_to_legacy", "truncate_message_set",
]
