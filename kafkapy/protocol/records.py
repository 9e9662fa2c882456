"""Record batches (magic 2): header parsing, validation and in-place patching.

The broker's hot path treats a batch as opaque bytes: it reads the fixed
61-byte header, checks the CRC32C (which covers everything from the
attributes field to the end of the batch), and patches the base offset and
partition leader epoch in place -- neither is covered by the CRC.
Records are only decoded where their meaning is needed.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from crc32c import crc32c

from .errors import CorruptRecordError

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


def _zigzag_varint(out: bytearray, value: int) -> None:
    value = (value << 1) ^ (value >> 63)
    while value & ~0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def encode_record(offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None,
                  headers=()) -> bytes:
    """Encode one record of a v2 batch (its length prefix included)."""
    body = bytearray(b"\x00")  # record attributes, unused
    _zigzag_varint(body, timestamp_delta)
    _zigzag_varint(body, offset_delta)
    for part in (key, value):
        if part is None:
            _zigzag_varint(body, -1)
        else:
            _zigzag_varint(body, len(part))
            body += part
    _zigzag_varint(body, len(headers))
    for hkey, hvalue in headers:
        hkey_bytes = hkey.encode() if isinstance(hkey, str) else hkey
        _zigzag_varint(body, len(hkey_bytes))
        body += hkey_bytes
        if hvalue is None:
            _zigzag_varint(body, -1)
        else:
            _zigzag_varint(body, len(hvalue))
            body += hvalue
    out = bytearray()
    _zigzag_varint(out, len(body))
    return bytes(out + body)


def build_batch(records, *, base_offset: int = 0, base_timestamp: int | None = None,
                attributes: int = 0, producer_id: int = NO_PRODUCER_ID,
                producer_epoch: int = NO_PRODUCER_EPOCH, base_sequence: int = NO_SEQUENCE,
                partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
                records_payload: bytes | None = None) -> bytes:
    """Build an uncompressed v2 batch from (key, value[, headers[, timestamp]]) tuples.

    `records_payload`, when given, replaces the encoded records (used by the
    compression layer, which passes the compressed record bytes and sets the codec
    bits in `attributes`).
    """
    import time

    records = list(records)
    if base_timestamp is None:
        base_timestamp = int(time.time() * 1000)
    max_timestamp = base_timestamp
    if records_payload is None:
        parts = []
        for i, rec in enumerate(records):
            key, value = rec[0], rec[1]
            headers = rec[2] if len(rec) > 2 else ()
            ts = rec[3] if len(rec) > 3 and rec[3] is not None else base_timestamp
            max_timestamp = max(max_timestamp, ts)
            parts.append(encode_record(i, ts - base_timestamp, key, value, headers))
        records_payload = b"".join(parts)
    count = len(records)
    last_offset_delta = max(count - 1, 0)
    batch_length = HEADER_SIZE - LOG_OVERHEAD + len(records_payload)
    buf = bytearray(HEADER_SIZE) + records_payload
    _HEADER.pack_into(buf, 0, base_offset, batch_length, partition_leader_epoch, 2, 0, attributes,
                      last_offset_delta, base_timestamp, max_timestamp, producer_id, producer_epoch,
                      base_sequence, count)
    struct.pack_into(">I", buf, CRC_POS, crc32c(memoryview(buf)[ATTRIBUTES_POS:]))
    return bytes(buf)
