"""Control batches: transaction markers (commit/abort) written by the broker.

A control batch has the transactional and control attribute bits set and holds
one record whose key is (version int16, type int16) and, for transaction
markers, whose value is (version int16, coordinator epoch int32) -- Kafka's
ControlRecordType and EndTransactionMarker.
"""
from __future__ import annotations

import struct
from enum import IntEnum

from .errors import CorruptRecordError
from .records import NO_PARTITION_LEADER_EPOCH, BatchHeader, Record, build_batch, iter_records


class ControlRecordType(IntEnum):
    """Kafka's control record types (key field `type`)."""

    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


CONTROL_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0
NO_COORDINATOR_EPOCH = -1

_KEY = struct.Struct(">hh")
_MARKER_VALUE = struct.Struct(">hi")
_MARKERS = {"abort": ControlRecordType.ABORT, "commit": ControlRecordType.COMMIT}


def marker_type(marker) -> ControlRecordType:
    """ABORT or COMMIT from "abort"/"commit", a bool (True = commit) or the type id."""
    if isinstance(marker, str):
        try:
            return _MARKERS[marker.lower()]
        except KeyError:
            raise ValueError(f"transaction marker must be 'commit' or 'abort', not {marker!r}") from None
    if isinstance(marker, bool):
        return ControlRecordType.COMMIT if marker else ControlRecordType.ABORT
    kind = ControlRecordType(marker)
    if kind not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        raise ValueError(f"{kind.name} is not a transaction marker")
    return kind


def encode_end_txn_marker(marker, coordinator_epoch: int) -> tuple[bytes, bytes]:
    """Key and value of a commit/abort marker record."""
    key = _KEY.pack(CONTROL_KEY_VERSION, marker_type(marker))
    value = _MARKER_VALUE.pack(END_TXN_MARKER_VERSION, coordinator_epoch)
    return key, value


def build_control_batch(marker, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                        base_offset: int = 0, timestamp: int | None = None,
                        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH) -> bytes:
    """A transaction-marker batch as the broker appends it on WriteTxnMarkers.

    Like Kafka's MemoryRecords.withEndTransactionMarker: transactional + control
    bits, no base sequence, one record at `base_offset` stamped `timestamp`
    (default now).
    """
    key, value = encode_end_txn_marker(marker, coordinator_epoch)
    records = [(key, value, (), timestamp)]
    return build_batch(records, base_offset=base_offset, base_timestamp=timestamp,
                       producer_id=producer_id, producer_epoch=producer_epoch,
                       partition_leader_epoch=partition_leader_epoch, is_transactional=True,
                       is_control=True)


def control_record_type(key: bytes | None) -> int:
    """The type id in a control record key; a ControlRecordType when known, else the raw int."""
    if key is None or len(key) < _KEY.size:
        raise CorruptRecordError(
            f"control record key must have at least 4 bytes, found {0 if key is None else len(key)}")
    version, kind = _KEY.unpack_from(key)
    if version < 0:
        raise CorruptRecordError(f"invalid control record key version {version}")
    try:
        return ControlRecordType(kind)
    except ValueError:
        return kind


def parse_control_record(record: Record) -> tuple[int, int]:
    """(type, coordinator epoch) of a control record; the epoch is -1 for non-markers.

    Newer key/value versions are read by their version-0 prefix, as Kafka does.
    """
    kind = control_record_type(record.key)
    if kind not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        return kind, NO_COORDINATOR_EPOCH
    value = record.value
    if value is None or len(value) < _MARKER_VALUE.size:
        raise CorruptRecordError(
            f"transaction marker value must have at least 6 bytes, found {0 if value is None else len(value)}")
    version, coordinator_epoch = _MARKER_VALUE.unpack_from(value)
    if version < 0:
        raise CorruptRecordError(f"invalid transaction marker version {version}")
    return kind, coordinator_epoch


def read_control_batch_marker(batch, header: BatchHeader | None = None) -> tuple[int, int]:
    """(type, coordinator epoch) of the first record of a control batch."""
    for record in iter_records(batch, header, max_size=1024 * 1024):
        return parse_control_record(record)
    raise CorruptRecordError("control batch holds no records")


__all__ = [
    "ControlRecordType", "NO_COORDINATOR_EPOCH", "marker_type", "encode_end_txn_marker",
    "build_control_batch", "control_record_type", "parse_control_record", "read_control_batch_marker",
]
