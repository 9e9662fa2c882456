"""Idempotent/transactional producer state of one partition, as Kafka's ProducerStateManager keeps it.

Per producer id the manager remembers the epoch, the metadata of its last 5 data batches (enough to
answer a retry of any of the max.in.flight.requests.per.connection=5 batches a producer may have in
flight), the first offset of its open transaction and the last transaction coordinator epoch.

Rules (KIP-98, KIP-360, Kafka >= 2.7 error codes), applied by `check` to a batch from a client:

- producer_id < 0: not an idempotent batch, nothing to check.
- unknown producer id (fresh log, expired, or all its data deleted): any sequence is accepted. Since
  Kafka 2.5 the broker no longer answers UNKNOWN_PRODUCER_ID here; the producer state is rebuilt
  from whatever it sends.
- epoch lower than the known one: INVALID_PRODUCER_EPOCH (47) -- a zombie producer.
- same epoch and (first seq, last seq) equal to one of the retained 5 batches: a retry; the
  original offsets are returned (`DuplicateBatch`) and the batch must not be appended again.
- same epoch otherwise: the batch must continue the sequence, first seq == last seq + 1, wrapping
  from 2**31-1 to 0; anything else (gaps, and retries older than the retained 5) is
  OUT_OF_ORDER_SEQUENCE_NUMBER (45). Kafka never answers DUPLICATE_SEQUENCE_NUMBER any more.
- higher epoch (the producer bumped it): the batch must start at sequence 0, else
  OUT_OF_ORDER_SEQUENCE_NUMBER.
- a non-transactional batch while the producer has an open transaction: INVALID_TXN_STATE (48).
- control batches (transaction markers, written by the broker) are not sequence-checked; only the
  producer epoch and, when given, the coordinator epoch (TRANSACTION_COORDINATOR_FENCED, 52).

`update` applies a batch after it got its offsets and is never refused: it is also what recovery
and replication use to rebuild state from batch headers (Kafka's REPLICATION origin).

Snapshots use Kafka's own producer snapshot format (version 1), so Kafka's tools can read them:
int16 version, uint32 CRC32C of everything after the CRC, int32 count, then per producer
int64 producer id, int16 epoch, int32 last sequence, int64 last offset, int32 offset delta,
int64 timestamp, int32 coordinator epoch, int64 current transaction first offset (-1 = none).
Like Kafka, a snapshot keeps only the last batch of each producer, so after a restart retries are
recognised for that batch and for every batch replayed from the log after the snapshot.

Differences from Kafka, on purpose: snapshots below the log start offset are kept and loaded
(Kafka deletes them, forgetting producers whose data was all deleted by retention -- which it then
accepts at any sequence anyway); only the newest two snapshots are kept rather than one per segment.

Not thread-safe: the owning PartitionLog serialises calls under its own lock.
"""
from __future__ import annotations

import logging
import os
import re
import struct
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.protocol.records import NO_PRODUCER_EPOCH, NO_SEQUENCE, BatchHeader

log = logging.getLogger(__name__)


def crc32c(data) -> int:
    """The CRC-32C of `data`; imports crc32c on first use and rebinds this name to its C function
    (as protocol.records.crc32c, which see)."""
    global crc32c
    from crc32c import crc32c

    return crc32c(data)


__all__ = [
    "BatchMetadata",
    "CompletedTxn",
    "CorruptSnapshotError",
    "DEFAULT_PRODUCER_ID_EXPIRATION_MS",
    "DuplicateBatch",
    "InvalidProducerEpochError",
    "InvalidTxnStateError",
    "NUM_BATCHES_TO_RETAIN",
    "OutOfOrderSequenceError",
    "ProducerStateEntry",
    "ProducerStateManager",
    "TransactionCoordinatorFencedError",
    "read_snapshot",
    "snapshot_file_name",
    "write_snapshot",
]

# Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN: matches the producer's max in-flight requests.
NUM_BATCHES_TO_RETAIN = 5
# producer.id.expiration.ms default (1 day).
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000
SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOTS_TO_KEEP = 2

_MAX_SEQUENCE = 0x7FFFFFFF
_SNAPSHOT_VERSION = 1
_SNAPSHOT_HEADER = struct.Struct(">hIi")  # version, crc, entry count
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")
_CRC_START = 6  # the CRC covers the entry count and the entries
_SNAPSHOT_NAME = re.compile(r"^(\d{20})\.snapshot$")


class OutOfOrderSequenceError(KafkaError):
    """A batch's sequence does not continue the producer's (OUT_OF_ORDER_SEQUENCE_NUMBER)."""

    code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidProducerEpochError(KafkaError):
    """A batch from an older epoch than the partition has seen (INVALID_PRODUCER_EPOCH)."""

    code = ErrorCode.INVALID_PRODUCER_EPOCH


class InvalidTxnStateError(KafkaError):
    """A non-transactional batch from a producer with an open transaction (INVALID_TXN_STATE)."""

    code = ErrorCode.INVALID_TXN_STATE


class TransactionCoordinatorFencedError(KafkaError):
    """A marker from an older transaction coordinator epoch (TRANSACTION_COORDINATOR_FENCED)."""

    code = ErrorCode.TRANSACTION_COORDINATOR_FENCED


class CorruptSnapshotError(KafkaError):
    """A producer snapshot file that cannot be trusted; the manager deletes it and falls back."""

    code = ErrorCode.UNKNOWN_SERVER_ERROR


@dataclass(slots=True, frozen=True)
class BatchMetadata:
    """Sequence range and offsets of one appended data batch, kept for duplicate detection."""

    first_seq: int
    last_seq: int
    base_offset: int
    last_offset: int
    timestamp: int  # the batch's max timestamp (the append time under LogAppendTime)


@dataclass(slots=True)
class DuplicateBatch:
    """Where a retried batch was first appended: the produce response reports these offsets."""

    base_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class CompletedTxn:
    """A transaction closed by a marker: its first data offset and the marker's offset."""

    producer_id: int
    first_offset: int
    last_offset: int


def _new_batch_deque() -> deque:
    return deque(maxlen=NUM_BATCHES_TO_RETAIN)


@dataclass(slots=True)
class ProducerStateEntry:
    """What the partition knows about one producer id (also what DescribeProducers reports)."""

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: deque = field(default_factory=_new_batch_deque)  # of BatchMetadata, oldest first
    coordinator_epoch: int = -1
    last_timestamp: int = -1
    current_txn_first_offset: int = -1  # -1: no open transaction

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def first_seq(self) -> int:
        return self.batches[0].first_seq if self.batches else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """The retained batch with exactly this epoch and sequence range, if any."""
        if epoch != self.producer_epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None

    def update_epoch(self, epoch: int) -> None:
        # Sequences restart with every epoch, so the old batches can no longer match a retry.
        if epoch != self.producer_epoch:
            self.batches.clear()
            self.producer_epoch = epoch

    def add_batch(self, epoch: int, batch: BatchMetadata) -> None:
        self.update_epoch(epoch)
        self.batches.append(batch)
        self.last_timestamp = batch.timestamp


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _MAX_SEQUENCE)


def snapshot_file_name(offset: int) -> str:
    """Kafka's snapshot file name: the offset zero-padded to 20 digits, then `.snapshot`."""
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


def write_snapshot(path: Path, producers: Mapping[int, ProducerStateEntry]) -> None:
    """Write producer entries to `path` atomically (temp file, fsync, rename, directory fsync)."""
    buf = bytearray(_SNAPSHOT_HEADER.size + _SNAPSHOT_ENTRY.size * len(producers))
    _SNAPSHOT_HEADER.pack_into(buf, 0, _SNAPSHOT_VERSION, 0, len(producers))
    pos = _SNAPSHOT_HEADER.size
    for pid in sorted(producers):
        entry = producers[pid]
        if entry.batches:
            last = entry.batches[-1]
            last_seq, last_offset = last.last_seq, last.last_offset
            offset_delta = last.last_offset - last.base_offset
        else:
            last_seq, last_offset, offset_delta = NO_SEQUENCE, -1, 0
        _SNAPSHOT_ENTRY.pack_into(buf, pos, pid, entry.producer_epoch, last_seq, last_offset,
                                  offset_delta, entry.last_timestamp, entry.coordinator_epoch,
                                  entry.current_txn_first_offset)
        pos += _SNAPSHOT_ENTRY.size
    struct.pack_into(">I", buf, 2, crc32c(memoryview(buf)[_CRC_START:]))
    _write_atomically(path, bytes(buf))


def read_snapshot(path: Path) -> list[ProducerStateEntry]:
    """Parse a snapshot file; raises CorruptSnapshotError if its version, size or CRC is wrong."""
    data = path.read_bytes()
    if len(data) < _SNAPSHOT_HEADER.size:
        raise CorruptSnapshotError(f"producer snapshot {path} is truncated ({len(data)} bytes)")
    version, crc, count = _SNAPSHOT_HEADER.unpack_from(data, 0)
    if version != _SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"producer snapshot {path} has unknown version {version}")
    if count < 0 or len(data) != _SNAPSHOT_HEADER.size + count * _SNAPSHOT_ENTRY.size:
        raise CorruptSnapshotError(f"producer snapshot {path} size does not match {count} entries")
    computed = crc32c(memoryview(data)[_CRC_START:])
    if computed != crc:
        raise CorruptSnapshotError(f"producer snapshot {path} CRC mismatch: stored {crc}, computed {computed}")
    entries = []
    for (pid, epoch, last_seq, last_offset, offset_delta, timestamp, coordinator_epoch,
         txn_first_offset) in _SNAPSHOT_ENTRY.iter_unpack(memoryview(data)[_SNAPSHOT_HEADER.size:]):
        entry = ProducerStateEntry(pid, epoch, coordinator_epoch=coordinator_epoch,
                                   last_timestamp=timestamp,
                                   current_txn_first_offset=txn_first_offset if txn_first_offset >= 0 else -1)
        if last_offset >= 0:
            first_seq = NO_SEQUENCE if last_seq < 0 else (last_seq - offset_delta) & _MAX_SEQUENCE
            entry.batches.append(BatchMetadata(first_seq, last_seq, last_offset - offset_delta,
                                               last_offset, timestamp))
        entries.append(entry)
    return entries


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    _fsync_dir(path.parent)


class ProducerStateManager:
    """Producer ids, epochs, sequences and open transactions of one partition, with snapshots."""

    def __init__(self, partition_dir: Path | str, *,
                 producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS):
        self.dir = Path(partition_dir)
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self._producers: dict[int, ProducerStateEntry] = {}
        # producer id -> first offset of its open transaction
        self._ongoing_txns: dict[int, int] = {}
        # Next offset after the last batch applied: the offset a snapshot taken now describes.
        self._map_end_offset = 0
        self._snapshot_offsets: list[int] = self._scan_snapshots()

    # ----------------------------------------------------------------- validation and update

    def check(self, header: BatchHeader, *, coordinator_epoch: int | None = None,
              from_client: bool = True) -> DuplicateBatch | None:
        """Validate a batch before it is appended.

        Returns the original offsets if the batch is a retry of one of the producer's last 5
        batches (do not append it); None if it may be appended. Raises OutOfOrderSequenceError,
        InvalidProducerEpochError, InvalidTxnStateError, TransactionCoordinatorFencedError, or
        KafkaError(INVALID_RECORD) for a client's idempotent data batch without a sequence number.
        `coordinator_epoch` is the marker's coordinator epoch, for control batches.
        `from_client=False` is Kafka's COORDINATOR origin (e.g. transactional offset commits the
        group coordinator writes, which carry no sequence): only epoch and transaction state are
        checked, with no duplicate detection.
        """
        pid = header.producer_id
        if pid < 0:
            return None
        epoch = header.producer_epoch
        if header.is_control:
            entry = self._producers.get(pid)
            if entry is None:
                return None
            if epoch < entry.producer_epoch:
                raise InvalidProducerEpochError(
                    f"marker epoch {epoch} of producer {pid} in {self.dir.name} is older than {entry.producer_epoch}")
            if coordinator_epoch is not None and entry.coordinator_epoch > coordinator_epoch:
                raise TransactionCoordinatorFencedError(
                    f"coordinator epoch {coordinator_epoch} of marker for producer {pid} in {self.dir.name} "
                    f"is older than {entry.coordinator_epoch}")
            return None
        first_seq = header.base_sequence
        if first_seq < 0 and from_client:
            # Kafka's LogValidator rejects this before the producer state is consulted.
            raise KafkaError(f"invalid sequence number {first_seq} in batch of producer {pid}",
                             code=ErrorCode.INVALID_RECORD)
        entry = self._producers.get(pid)
        if entry is None:
            return None
        current_epoch = entry.producer_epoch
        if not from_client:
            if epoch < current_epoch:
                raise InvalidProducerEpochError(
                    f"epoch {epoch} of producer {pid} in {self.dir.name} is older than {current_epoch}")
        elif epoch == current_epoch:
            duplicate = entry.find_duplicate(epoch, first_seq, header.last_sequence)
            if duplicate is not None:
                return DuplicateBatch(duplicate.base_offset, duplicate.last_offset, duplicate.timestamp)
            if current_epoch != NO_PRODUCER_EPOCH and not _in_sequence(entry.last_seq, first_seq):
                raise OutOfOrderSequenceError(
                    f"out of order sequence for producer {pid} in {self.dir.name}: {first_seq} "
                    f"(incoming), {entry.last_seq} (current end sequence)")
        elif epoch < current_epoch:
            raise InvalidProducerEpochError(
                f"epoch {epoch} of producer {pid} in {self.dir.name} is older than {current_epoch}")
        elif first_seq != 0 and current_epoch != NO_PRODUCER_EPOCH:
            raise OutOfOrderSequenceError(
                f"new epoch {epoch} of producer {pid} in {self.dir.name} must start at sequence 0, "
                f"got {first_seq}")
        if entry.current_txn_first_offset >= 0 and not header.is_transactional:
            raise InvalidTxnStateError(
                f"non-transactional batch from producer {pid} in {self.dir.name} during its open transaction")
        return None

    def update(self, header: BatchHeader, *, coordinator_epoch: int | None = None) -> CompletedTxn | None:
        """Record a batch that has been appended at its (now assigned) offsets.

        Never raises for sequence or epoch problems: recovery and replication replay headers
        through here. Pass the header as written, i.e. with LogAppendTime already stamped into
        max_timestamp, since that is the timestamp a retry is answered with. For a control batch
        returns the transaction it closed (None if the producer had none open);
        `coordinator_epoch` is the marker's, when the caller knows it.
        """
        next_offset = header.next_offset
        if next_offset > self._map_end_offset:
            self._map_end_offset = next_offset
        pid = header.producer_id
        if pid < 0:
            return None
        entry = self._producers.get(pid)
        if entry is None:
            entry = self._producers[pid] = ProducerStateEntry(pid)
        if header.is_control:
            completed = None
            if entry.current_txn_first_offset >= 0:
                completed = CompletedTxn(pid, entry.current_txn_first_offset, header.base_offset)
                entry.current_txn_first_offset = -1
                self._ongoing_txns.pop(pid, None)
            entry.update_epoch(header.producer_epoch)
            if coordinator_epoch is not None:
                entry.coordinator_epoch = coordinator_epoch
            entry.last_timestamp = header.max_timestamp
            return completed
        base_offset = header.base_offset
        entry.add_batch(header.producer_epoch, BatchMetadata(
            header.base_sequence, header.last_sequence, base_offset, header.last_offset, header.max_timestamp))
        if header.is_transactional and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = base_offset
            self._ongoing_txns[pid] = base_offset
        return None

    # ----------------------------------------------------------------- queries

    @property
    def map_end_offset(self) -> int:
        """The offset after the last batch applied (the offset a snapshot taken now would carry)."""
        return self._map_end_offset

    def update_map_end_offset(self, offset: int) -> None:
        """Set the map end offset, e.g. to the log end offset after batches not passed to `update`."""
        self._map_end_offset = offset

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        """The producer's state, for DescribeProducers and duplicate lookups; None if unknown."""
        return self._producers.get(producer_id)

    def active_producers(self) -> Mapping[int, ProducerStateEntry]:
        """Read-only view of every known producer id's state."""
        return MappingProxyType(self._producers)

    def first_undecided_offset(self) -> int | None:
        """First offset of the oldest open transaction (bounds the last stable offset), or None."""
        return min(self._ongoing_txns.values()) if self._ongoing_txns else None

    def ongoing_transactions(self) -> Mapping[int, int]:
        """Read-only view of producer id -> first offset of its open transaction."""
        return MappingProxyType(self._ongoing_txns)

    def snapshot_offsets(self) -> list[int]:
        """Offsets of the snapshot files on disk, oldest first."""
        return list(self._snapshot_offsets)

    # ----------------------------------------------------------------- expiry

    def remove_expired(self, now_ms: int, producer_id_expiration_ms: int | None = None) -> int:
        """Forget producers idle for producer.id.expiration.ms; returns how many were removed.

        Idle time is measured, as in Kafka, from the producer's last batch max timestamp (its
        CreateTime unless the topic uses LogAppendTime). Producers with an open transaction stay.
        """
        expiration_ms = self.producer_id_expiration_ms if producer_id_expiration_ms is None \
            else producer_id_expiration_ms
        expired = [pid for pid, entry in self._producers.items()
                   if self._is_expired(entry, now_ms, expiration_ms)]
        for pid in expired:
            del self._producers[pid]
        return len(expired)

    @staticmethod
    def _is_expired(entry: ProducerStateEntry, now_ms: int, expiration_ms: int) -> bool:
        return entry.current_txn_first_offset < 0 and now_ms - entry.last_timestamp >= expiration_ms

    # ----------------------------------------------------------------- snapshots and recovery

    def snapshot(self, offset: int | None = None) -> Path:
        """Write the current state as `<offset>.snapshot` and keep only the newest two snapshots.

        `offset` defaults to the map end offset; it must be the log end offset the state
        describes (the caller takes snapshots at segment roll and clean shutdown).
        """
        if offset is None:
            offset = self._map_end_offset
        path = self.dir / snapshot_file_name(offset)
        started = time.monotonic()
        write_snapshot(path, self._producers)
        if offset not in self._snapshot_offsets:
            self._snapshot_offsets.append(offset)
            self._snapshot_offsets.sort()
        while len(self._snapshot_offsets) > SNAPSHOTS_TO_KEEP:
            self._delete_snapshot(self._snapshot_offsets[0])
        log.debug("wrote producer snapshot %s at offset %d with %d producer ids in %.1f ms",
                 self.dir.name, offset, len(self._producers), (time.monotonic() - started) * 1000)
        return path

    def load(self, log_start_offset: int, log_end_offset: int, *, now_ms: int | None = None) -> int:
        """Rebuild state from the newest usable snapshot at or below `log_end_offset`.

        Deletes snapshots above `log_end_offset` and corrupt ones (falling back to the next older).
        Producers already expired at `now_ms` (default: wall clock) are not loaded. Returns the
        offset from which the caller must replay batch headers through `update` up to the log end.
        """
        self._clear()
        for name in os.listdir(self.dir):
            if name.endswith(SNAPSHOT_SUFFIX + ".tmp"):
                log.info("removing unfinished producer snapshot %s/%s", self.dir.name, name)
                (self.dir / name).unlink(missing_ok=True)
        self._snapshot_offsets = self._scan_snapshots()
        for offset in [o for o in self._snapshot_offsets if o > log_end_offset]:
            self._delete_snapshot(offset)
        if now_ms is None:
            now_ms = int(time.time() * 1000)
        while self._snapshot_offsets:
            offset = self._snapshot_offsets[-1]
            path = self.dir / snapshot_file_name(offset)
            try:
                entries = read_snapshot(path)
            except (CorruptSnapshotError, OSError) as exc:
                log.warning("deleting unusable producer snapshot %s: %s", path, exc)
                self._delete_snapshot(offset)
                continue
            for entry in entries:
                if self._is_expired(entry, now_ms, self.producer_id_expiration_ms):
                    continue
                self._producers[entry.producer_id] = entry
                if entry.current_txn_first_offset >= 0:
                    self._ongoing_txns[entry.producer_id] = entry.current_txn_first_offset
            self._map_end_offset = max(offset, log_start_offset)
            log.debug("loaded producer state of %s from snapshot at offset %d (%d producer ids)",
                     self.dir.name, offset, len(self._producers))
            return self._map_end_offset
        self._map_end_offset = log_start_offset
        return log_start_offset

    def truncate_to(self, offset: int, log_start_offset: int = 0, *, now_ms: int | None = None) -> int:
        """The log was truncated to end at `offset`: drop snapshots above it and reload.

        Returns the offset from which the caller must replay batch headers up to `offset`
        (== `offset` when the state already ends there and nothing needs replaying).
        """
        for snap in [o for o in self._snapshot_offsets if o > offset]:
            self._delete_snapshot(snap)
        if offset == self._map_end_offset:
            return offset
        return self.load(log_start_offset, offset, now_ms=now_ms)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """The whole log was replaced by an empty one starting at `offset`: forget everything."""
        self._clear()
        for snap in list(self._snapshot_offsets):
            self._delete_snapshot(snap)
        self._map_end_offset = offset

    def _clear(self) -> None:
        self._producers.clear()
        self._ongoing_txns.clear()

    def _scan_snapshots(self) -> list[int]:
        try:
            names = os.listdir(self.dir)
        except FileNotFoundError:
            return []
        return sorted(int(m.group(1)) for m in map(_SNAPSHOT_NAME.match, names) if m)

    def _delete_snapshot(self, offset: int) -> None:
        if offset in self._snapshot_offsets:
            self._snapshot_offsets.remove(offset)
        (self.dir / snapshot_file_name(offset)).unlink(missing_ok=True)
