"""Record batches (magic 2): header parsing, validation, in-place patching, record codec.

The broker's hot path treats a batch as opaque bytes: it reads the fixed
61-byte header, checks the CRC32C (which covers everything from the
attributes field to the end of the batch), and patches the base offset and
partition leader epoch in place -- neither is covered by the CRC.
Records are only decoded where their meaning is needed (`iter_records`), and
`build_batch` writes batches for tests, conversions and broker-written batches.
"""
from __future__ import annotations

import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from .compression import DEFAULT_MAX_DECOMPRESSED_SIZE, compress, decompress
from .errors import CorruptRecordError


def crc32c(data) -> int:
    """The CRC-32C of `data` (a v2 batch's checksum). The first call imports the crc32c package and
    rebinds this name to its C function, which later calls reach directly: the package's import
    reads its distribution metadata, some 20 ms that a broker's start-up does not otherwise need."""
    global crc32c
    from crc32c import crc32c

    return crc32c(data)


# Byte positions inside a v2 batch header.
BASE_OFFSET_POS = 0
LENGTH_POS = 8
PARTITION_LEADER_EPOCH_POS = 12
MAGIC_POS = 16
CRC_POS = 17
ATTRIBUTES_POS = 21
LAST_OFFSET_DELTA_POS = 23
BASE_TIMESTAMP_POS = 27
MAX_TIMESTAMP_POS = 35
PRODUCER_ID_POS = 43
PRODUCER_EPOCH_POS = 51
BASE_SEQUENCE_POS = 53
RECORDS_COUNT_POS = 57
HEADER_SIZE = 61
# baseOffset + batchLength: the part of the header not counted in batchLength.
LOG_OVERHEAD = 12

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_Q = struct.Struct(">q")
_I = struct.Struct(">i")
_U = struct.Struct(">I")
_H = struct.Struct(">h")


@dataclass(slots=True)
class BatchHeader:
    """The fixed fields of one record batch; `position` is where it starts in its buffer."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int
    position: int = 0

    @property
    def size(self) -> int:
        """Total bytes of the batch including the 12-byte offset/length prefix."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime."""
        return 1 if self.attributes & TIMESTAMP_TYPE_MASK else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


def read_batch_header(buf, pos: int = 0) -> BatchHeader:
    """Parse the header of the batch starting at `pos`. Does not check the CRC.

    Raises CorruptRecordError if fewer than 61 bytes remain, the magic is not 2,
    or the declared length is impossible.
    """
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptRecordError(f"record batch header truncated at byte {pos}")
    fields = _HEADER.unpack_from(buf, pos)
    header = BatchHeader(*fields, position=pos)
    if header.magic != 2:
        raise CorruptRecordError(f"unsupported record batch magic {header.magic} at byte {pos}")
    if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptRecordError(f"record batch length {header.batch_length} too small at byte {pos}")
    return header


def batch_crc(buf, pos: int, size: int) -> int:
    """CRC32C of a batch's bytes from the attributes field to its end."""
    return crc32c(memoryview(buf)[pos + ATTRIBUTES_POS : pos + size])


def validate_batch(buf, pos: int = 0) -> BatchHeader:
    """Parse and fully check one batch at `pos`: header, length within buffer, CRC32C."""
    header = read_batch_header(buf, pos)
    if pos + header.size > len(buf):
        raise CorruptRecordError(
            f"record batch at byte {pos} declares {header.size} bytes, only {len(buf) - pos} present"
        )
    if batch_crc(buf, pos, header.size) != header.crc:
        raise CorruptRecordError(f"record batch CRC mismatch at byte {pos}")
    if header.records_count < 0 or header.last_offset_delta < 0:
        raise CorruptRecordError(f"record batch at byte {pos} has negative count or offset delta")
    return header


def iter_batch_headers(buf, validate: bool = True):
    """Yield the header of every batch in `buf`, which must hold whole batches back to back."""
    pos = 0
    end = len(buf)
    while pos < end:
        header = validate_batch(buf, pos) if validate else read_batch_header(buf, pos)
        if not validate and pos + header.size > end:
            raise CorruptRecordError(f"record batch at byte {pos} runs past the end of the buffer")
        yield header
        pos += header.size


def set_base_offset(buf, base_offset: int, pos: int = 0) -> None:
    """Patch a batch's base offset in place (not covered by the CRC)."""
    _Q.pack_into(buf, pos + BASE_OFFSET_POS, base_offset)


def set_partition_leader_epoch(buf, epoch: int, pos: int = 0) -> None:
    """Patch a batch's partition leader epoch in place (not covered by the CRC)."""
    _I.pack_into(buf, pos + PARTITION_LEADER_EPOCH_POS, epoch)


def set_log_append_time(buf, pos: int, timestamp: int) -> None:
    """Stamp a batch with LogAppendTime in place: max timestamp, timestamp-type bit, CRC.

    Records keep their timestamp deltas; readers take every record's timestamp
    from the max timestamp once the bit is set, as Kafka does.
    """
    (batch_length,) = _I.unpack_from(buf, pos + LENGTH_POS)
    end = pos + LOG_OVERHEAD + batch_length
    if batch_length < HEADER_SIZE - LOG_OVERHEAD or end > len(buf):
        raise CorruptRecordError(f"record batch at byte {pos} has an impossible length {batch_length}")
    (attributes,) = _H.unpack_from(buf, pos + ATTRIBUTES_POS)
    _H.pack_into(buf, pos + ATTRIBUTES_POS, attributes | TIMESTAMP_TYPE_MASK)
    _Q.pack_into(buf, pos + MAX_TIMESTAMP_POS, timestamp)
    _U.pack_into(buf, pos + CRC_POS, crc32c(memoryview(buf)[pos + ATTRIBUTES_POS : end]))


def read_magic(buf, pos: int = 0) -> int:
    """The magic byte of the batch or legacy message at `pos` (same position in every format)."""
    if len(buf) - pos <= MAGIC_POS:
        raise CorruptRecordError(f"records truncated before the magic byte at byte {pos}")
    magic = buf[pos + MAGIC_POS]
    return magic - 256 if magic > 127 else magic


# -- records inside a batch ---------------------------------------------------------------------

@dataclass(slots=True)
class Record:
    """One decoded record with its absolute offset and resolved timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


def read_varint(buf, pos: int) -> tuple[int, int]:
    """Decode the zig-zag varint (int32) at `pos`; return (value, position after it).

    Like Kafka's ByteUtils.readVarint: at most 5 bytes, high bits of the fifth dropped.
    """
    result = 0
    shift = 0
    end = len(buf)
    while shift <= 28:
        if pos >= end:
            raise CorruptRecordError(f"varint truncated at byte {pos}")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            result &= 0xFFFFFFFF
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
    raise CorruptRecordError(f"varint longer than 5 bytes ending at byte {pos}")


def read_varlong(buf, pos: int) -> tuple[int, int]:
    """Decode the zig-zag varlong (int64) at `pos`; return (value, position after it)."""
    result = 0
    shift = 0
    end = len(buf)
    while shift <= 63:
        if pos >= end:
            raise CorruptRecordError(f"varlong truncated at byte {pos}")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            result &= 0xFFFFFFFFFFFFFFFF
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
    raise CorruptRecordError(f"varlong longer than 10 bytes ending at byte {pos}")


def iter_records(batch, header: BatchHeader | None = None,
                 max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> Iterator[Record]:
    """Lazily decode the records of one v2 batch, decompressing if needed.

    Without `header` the batch at position 0 of `batch` is fully validated first
    (CRC included); with it, the header is trusted and `header.position` says
    where the batch starts. Offsets and timestamps are resolved from the header
    (LogAppendTime batches give every record the max timestamp). `max_size` caps
    the decompressed size. Malformed records raise CorruptRecordError.
    """
    if header is None:
        header = validate_batch(batch, 0)
    start = header.position
    end = start + header.size
    if end > len(batch):
        raise CorruptRecordError(f"record batch at byte {start} runs past the end of the buffer")
    payload = memoryview(batch)[start + HEADER_SIZE : end]
    count = header.records_count
    if count < 0:
        raise CorruptRecordError(f"record batch at byte {start} has negative record count {count}")
    codec = header.compression
    if codec:
        data = decompress(codec, payload, max_size)
    else:
        data = bytes(payload)
    log_append_time = header.max_timestamp if header.attributes & TIMESTAMP_TYPE_MASK else None
    return _decode_records(data, count, header.base_offset, header.base_timestamp, log_append_time)


def decode_records(data: bytes, count: int, base_offset: int = 0, base_timestamp: int = 0,
                   log_append_time: int | None = None) -> list[Record]:
    """Decode `count` records from uncompressed record bytes (no batch header)."""
    return list(_decode_records(bytes(data), count, base_offset, base_timestamp, log_append_time))


def keyless_record_indexes(batch, header: BatchHeader,
                           max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> list[int]:
    """Indexes (within the batch) of the records whose key is null; [] if every record has one.

    For the produce path of compacted topics only (Kafka's LogValidator.validateKey): each
    record is skipped by its length after reading its key length, so values and headers are
    never copied. The batch is decompressed first if needed (at most `max_size` bytes).
    Raises CorruptRecordError for records that do not fit their declared lengths.
    """
    start = header.position
    payload = memoryview(batch)[start + HEADER_SIZE : start + header.size]
    data = decompress(header.compression, payload, max_size) if header.compression else bytes(payload)
    end = len(data)
    pos = 0
    index = 0
    keyless = []
    # Short varints are read inline (one or two bytes for the record length, one for the
    # deltas); the rest go to read_varint/read_varlong. The key's size is not decoded: its
    # sign is its lowest bit.
    try:
        for index in range(header.records_count):
            b = data[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:  # two bytes: records of 64 B to 8 KiB
                    b = (b & 0x7F) | (b2 << 7)
                    length = (b >> 1) ^ -(b & 1)
                    pos += 2
                else:
                    length, pos = read_varint(data, pos)
            record_end = pos + length
            if length < 6 or record_end > end:
                raise CorruptRecordError(f"record {index} has invalid length {length}")
            field = pos + 1  # after the attributes byte: timestamp delta, offset delta, key length
            if data[field] < 0x80:
                field += 1
            else:
                _, field = read_varlong(data, field)
            if data[field] < 0x80:
                field += 1
            else:
                _, field = read_varint(data, field)
            if field >= record_end:
                raise CorruptRecordError(f"record {index} ends before its key")
            if data[field] & 1:  # a zig-zag varint's lowest bit is its sign: a negative size is a null key
                keyless.append(index)
            pos = record_end
    except IndexError:
        raise CorruptRecordError(f"record {index} truncated at byte {pos}") from None
    if pos != end:
        raise CorruptRecordError(
            f"record batch declares {header.records_count} records but {end - pos} bytes remain after them")
    return keyless


def _decode_records(data: bytes, count: int, base_offset: int, base_timestamp: int,
                    log_append_time: int | None) -> Iterator[Record]:
    # Varints are decoded inline with one- and two-byte fast paths (record lengths and
    # value sizes of typical records take two bytes); longer ones go to read_varint.
    # Slices never raise on overrun, so every record's end is checked against its
    # declared length, and an IndexError from reading past the data is translated.
    pos = 0
    end = len(data)
    index = 0
    make_record = Record
    try:
        for index in range(count):
            b = data[pos]
            if b < 0x80:
                pos += 1
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    b = (b & 0x7F) | (b2 << 7)
                    pos += 2
                else:
                    b = None
            if b is None:
                length, pos = read_varint(data, pos)
            else:
                length = (b >> 1) ^ -(b & 1)
            record_end = pos + length
            if length < 6 or record_end > end:
                raise CorruptRecordError(f"record {index} has invalid length {length}")
            b = data[pos + 1]  # data[pos] is the unused record attributes byte
            if b < 0x80:
                timestamp_delta = (b >> 1) ^ -(b & 1)
                pos += 2
            else:
                timestamp_delta, pos = read_varlong(data, pos + 1)
            b = data[pos]
            if b < 0x80:
                offset_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                offset_delta, pos = read_varint(data, pos)
            # key
            b = data[pos]
            if b < 0x80:
                pos += 1
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    b = (b & 0x7F) | (b2 << 7)
                    pos += 2
                else:
                    b = None
            if b is None:
                size, pos = read_varint(data, pos)
            else:
                size = (b >> 1) ^ -(b & 1)
            if size >= 0:
                key = data[pos : pos + size]
                pos += size
            else:
                key = None
            # value
            b = data[pos]
            if b < 0x80:
                pos += 1
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    b = (b & 0x7F) | (b2 << 7)
                    pos += 2
                else:
                    b = None
            if b is None:
                size, pos = read_varint(data, pos)
            else:
                size = (b >> 1) ^ -(b & 1)
            if size >= 0:
                value = data[pos : pos + size]
                pos += size
            else:
                value = None
            b = data[pos]
            if b == 0:
                pos += 1
                headers = []
            else:
                header_count, pos = read_varint(data, pos)
                if header_count < 0 or header_count > (record_end - pos) // 2:
                    raise CorruptRecordError(f"record {index} has invalid header count {header_count}")
                headers = []
                for _ in range(header_count):
                    b = data[pos]
                    if b < 0x80:
                        size = (b >> 1) ^ -(b & 1)
                        pos += 1
                    else:
                        size, pos = read_varint(data, pos)
                    if size < 0:
                        raise CorruptRecordError(f"record {index} has a header with a null key")
                    hkey = data[pos : pos + size].decode("utf-8", "surrogateescape")
                    pos += size
                    b = data[pos]
                    if b < 0x80:
                        size = (b >> 1) ^ -(b & 1)
                        pos += 1
                    else:
                        size, pos = read_varint(data, pos)
                    if size >= 0:
                        hvalue = data[pos : pos + size]
                        pos += size
                    else:
                        hvalue = None
                    headers.append((hkey, hvalue))
            if pos != record_end:
                raise CorruptRecordError(
                    f"record {index}: expected to read {length} bytes of record payload, read "
                    f"{length + pos - record_end}")
            yield make_record(base_offset + offset_delta,
                              base_timestamp + timestamp_delta if log_append_time is None else log_append_time,
                              key, value, headers)
        index = count
    except IndexError:
        raise CorruptRecordError(f"record {index} truncated at byte {pos}") from None
    if pos != end:
        raise CorruptRecordError(
            f"record batch declares {count} records but {end - pos} bytes remain after them")


_SMALL_VARINTS = [bytes((i,)) for i in range(128)]


def encode_varint(value: int) -> bytes:
    """Zig-zag varint/varlong encoding of `value` (Kafka's record-level varints)."""
    value = (value << 1) ^ (value >> 63)
    if value < 0x80:
        return _SMALL_VARINTS[value]
    if value < 0x4000:
        return bytes(((value & 0x7F) | 0x80, value >> 7))
    out = bytearray()
    while value & ~0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_NULL = encode_varint(-1)


def encode_record(offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None,
                  headers=()) -> bytes:
    """Encode one record of a v2 batch (its length prefix included)."""
    varint = encode_varint
    parts = [b"\x00", varint(timestamp_delta), varint(offset_delta)]
    if key is None:
        parts.append(_NULL)
    else:
        parts.append(varint(len(key)))
        parts.append(key)
    if value is None:
        parts.append(_NULL)
    else:
        parts.append(varint(len(value)))
        parts.append(value)
    parts.append(varint(len(headers)))
    for hkey, hvalue in headers:
        # surrogateescape round-trips header keys that were not valid UTF-8 byte for byte.
        hkey_bytes = hkey.encode("utf-8", "surrogateescape") if isinstance(hkey, str) else hkey
        parts.append(varint(len(hkey_bytes)))
        parts.append(hkey_bytes)
        if hvalue is None:
            parts.append(_NULL)
        else:
            parts.append(varint(len(hvalue)))
            parts.append(hvalue)
    body = b"".join(parts)
    return varint(len(body)) + body


def build_batch(records, *, base_offset: int = 0, base_timestamp: int | None = None,
                attributes: int = 0, producer_id: int = NO_PRODUCER_ID,
                producer_epoch: int = NO_PRODUCER_EPOCH, base_sequence: int = NO_SEQUENCE,
                partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
                records_payload: bytes | None = None, compression: int = 0,
                is_transactional: bool = False, is_control: bool = False, timestamp_type: int = 0,
                max_timestamp: int | None = None, last_offset_delta: int | None = None) -> bytes:
    """Build a v2 batch from (key, value[, headers[, timestamp]]) tuples or Record objects.

    Tuples take consecutive offset deltas; a Record keeps `offset - base_offset` as
    its delta (for rewritten batches with gaps). `base_timestamp` defaults to the
    first record's timestamp, else now. `compression` is a codec id; the encoded
    records are compressed with it. `timestamp_type=1` marks LogAppendTime (give
    the append time as `max_timestamp`). `records_payload`, when given, replaces
    the encoded records verbatim: it must already be compressed with the codec
    named by `compression`/`attributes`.
    """
    records = list(records)
    if base_timestamp is None:
        base_timestamp = _first_timestamp(records)
    record_max_timestamp = NO_TIMESTAMP if records else base_timestamp
    max_delta = 0
    if records_payload is None:
        parts = []
        for i, rec in enumerate(records):
            if isinstance(rec, Record):
                key, value, headers, ts, delta = rec.key, rec.value, rec.headers, rec.timestamp, rec.offset - base_offset
            else:
                key, value = rec[0], rec[1]
                headers = rec[2] if len(rec) > 2 and rec[2] is not None else ()
                ts = rec[3] if len(rec) > 3 and rec[3] is not None else base_timestamp
                delta = i
            record_max_timestamp = max(record_max_timestamp, ts)
            max_delta = max(max_delta, delta)
            parts.append(encode_record(delta, ts - base_timestamp, key, value, headers))
        records_payload = b"".join(parts)
        if compression:
            records_payload = compress(compression, records_payload)
    else:
        max_delta = max(len(records) - 1, 0)
        for rec in records:
            ts = rec.timestamp if isinstance(rec, Record) else (
                rec[3] if len(rec) > 3 and rec[3] is not None else base_timestamp)
            record_max_timestamp = max(record_max_timestamp, ts)
    attributes |= compression & COMPRESSION_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_MASK
    if is_control:
        attributes |= CONTROL_MASK
    if timestamp_type:
        attributes |= TIMESTAMP_TYPE_MASK
    if max_timestamp is None:
        max_timestamp = record_max_timestamp
    if last_offset_delta is None:
        last_offset_delta = max_delta
    batch_length = HEADER_SIZE - LOG_OVERHEAD + len(records_payload)
    buf = bytearray(HEADER_SIZE) + records_payload
    _HEADER.pack_into(buf, 0, base_offset, batch_length, partition_leader_epoch, 2, 0, attributes,
                      last_offset_delta, base_timestamp, max_timestamp, producer_id, producer_epoch,
                      base_sequence, len(records))
    _U.pack_into(buf, CRC_POS, crc32c(memoryview(buf)[ATTRIBUTES_POS:]))
    return bytes(buf)


def _first_timestamp(records) -> int:
    if records:
        first = records[0]
        if isinstance(first, Record):
            return first.timestamp
        if len(first) > 3 and first[3] is not None:
            return first[3]
    return int(time.time() * 1000)
