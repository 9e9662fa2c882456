"""Opening a partition directory: find segments, recover the unflushed tail, rebuild state.

After a clean shutdown (the log dir's .kafka_cleanshutdown marker) segments are only
sanity-checked. Otherwise every segment that may hold data at or after the recovery point
is rescanned: each batch's header, length, CRC32C and offset continuity is checked, the
indexes are rebuilt, and everything from the first bad byte on is cut off -- including all
later segments, as Kafka does. Then the leader epoch cache and the producer state are made
consistent with what survived.
"""
from __future__ import annotations

import logging
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from kafkapy.protocol.errors import CorruptRecordError
from kafkapy.protocol.records import BatchHeader

from .checkpoints import CheckpointError, fsync_dir
from .dir_names import parse_partition_dir_name
from .config import LogConfig
from .leader_epoch import LeaderEpochCache
from .segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    SWAP_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    segment_file_name,
)
from .sparse_index import CorruptIndexError

log = logging.getLogger(__name__)

_LOG_NAME = re.compile(r"^(\d{20})\.log$")
_INDEX_NAME = re.compile(r"^(\d{20})\.(index|timeindex|txnindex)$")
_LEFTOVER_SUFFIXES = (DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX, ".tmp")
_SWAP_NAME = re.compile(r"^(\d{20})\.log\.swap$")

__all__ = ["RecoveredLog", "log_loaded", "parse_partition_dir_name", "recover_partition_dir"]


@dataclass(slots=True)
class RecoveredLog:
    """A partition directory as recovery left it, for PartitionLog.open to build the log on."""

    topic: str
    partition: int
    segments: list[LogSegment]
    log_start_offset: int
    log_end_offset: int
    leader_epochs: LeaderEpochCache
    recovered_segments: int
    started: float  # time.monotonic() when recovery began


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _remove_leftovers(directory: Path) -> tuple[list[int], set[int]]:
    """Delete files of interrupted operations and complete interrupted cleaner swaps; return
    the base offsets of .log files and those whose .log was just swapped in (their indexes
    are stale: they must be recovered)."""
    bases = []
    index_bases = {}
    swaps = []
    for name in os.listdir(directory):
        match = _SWAP_NAME.match(name)
        if match:
            swaps.append(int(match.group(1)))
            continue
        if name.endswith(_LEFTOVER_SUFFIXES) and not name.endswith(".snapshot.tmp"):
            log.info("%s: removing leftover file %s", directory.name, name)
            (directory / name).unlink(missing_ok=True)
            continue
        match = _LOG_NAME.match(name)
        if match:
            bases.append(int(match.group(1)))
            continue
        match = _INDEX_NAME.match(name)
        if match:
            index_bases.setdefault(int(match.group(1)), []).append(name)
    # A .log.swap is a cleaned segment whose swap was committed (the cleaner renames
    # .cleaned to .swap only once it is complete and synced): finish it, as Kafka does.
    for base in swaps:
        name = segment_file_name(base, LOG_SUFFIX)
        log.warning("%s: completing the interrupted swap of cleaned segment %s", directory.name, name)
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            (directory / segment_file_name(base, suffix)).unlink(missing_ok=True)
        os.replace(directory / (name + SWAP_SUFFIX), directory / name)
        if base not in bases:
            bases.append(base)
    if swaps:
        fsync_dir(directory)
    known = set(bases)
    for base, names in index_bases.items():
        if base not in known:
            for name in names:
                log.info("%s: removing index %s without a log file", directory.name, name)
                (directory / name).unlink(missing_ok=True)
    return sorted(bases), set(swaps)


class _BatchContinuity:
    """Recovery's acceptance rule: offsets follow each other (the base offset is not covered
    by the CRC) and leader epochs agree with the leader epoch checkpoint when it is readable."""

    def __init__(self, epochs: LeaderEpochCache | None, compacted: bool):
        self.epochs = epochs if epochs is not None and len(epochs) else None
        self.compacted = compacted
        self.gaps_allowed = compacted
        self.expected = -1

    def start_segment(self, base_offset: int, gaps_allowed: bool = False) -> None:
        """`gaps_allowed`: the segment is known to be cleaned (a completed swap) whatever the
        topic's current cleanup.policy says."""
        self.expected = base_offset
        self.gaps_allowed = self.compacted or gaps_allowed

    def __call__(self, header: BatchHeader) -> bool:
        base = header.base_offset
        if base != self.expected and not (self.gaps_allowed and base > self.expected):
            return False
        epochs = self.epochs
        if epochs is not None:
            # Every append records a new epoch in the checkpoint before writing its batch,
            # so a batch whose epoch disagrees with it has a damaged (uncovered) epoch field.
            known = epochs.epoch_for_offset(base)
            if known >= 0 and known != header.partition_leader_epoch:
                return False
        self.expected = base + header.last_offset_delta + 1
        return True


def _delete_segment_files(directory: Path, base: int) -> None:
    for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, ".txnindex"):
        (directory / segment_file_name(base, suffix)).unlink(missing_ok=True)


def recover_partition_dir(directory: Path, config: LogConfig, *, recovery_point: int = 0,
                          log_start_offset: int | None = None, clean_shutdown: bool = False) -> RecoveredLog:
    """Recover the segments and leader epochs of the partition log in `directory` (PartitionLog.open
    builds the log on them and replays its producer state)."""
    topic, partition = parse_partition_dir_name(directory.name)
    directory.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    now_ms = _now_ms()
    bases, swapped = _remove_leftovers(directory)
    end_offset_holder = [0]
    epochs = LeaderEpochCache(directory, lambda: end_offset_holder[0])
    epochs_trusted = True
    try:
        epochs.load()
        if not len(epochs) and bases:
            # no checkpoint, or a 0-byte one (created, never written; Kafka reads it as no
            # entries): the batches' epochs fill the cache quietly, nothing was damaged
            epochs_trusted = False
    except (CheckpointError, OSError) as exc:
        log.warning("%s: ignoring unreadable leader epoch checkpoint, rebuilding it from the log: %s",
                    directory.name, exc)
        epochs.clear(flush=False)
        epochs_trusted = False

    def open_segment(base: int, *, active: bool, fresh: bool = False, new: bool = False) -> LogSegment:
        return LogSegment(directory, base, max_index_size=config.segment_index_bytes, active=active,
                          now_ms=now_ms, index_interval=config.index_interval_bytes,
                          jitter_ms=config.segment_jitter_ms, fresh_indexes=fresh, new_file=new)

    segments: list[LogSegment] = []
    recovered: list[LogSegment] = []
    continuity = _BatchContinuity(epochs if epochs_trusted else None,
                                  "compact" in config.cleanup_policy.split(","))
    if clean_shutdown:
        first_to_recover = len(bases)
    else:
        first_to_recover = next((i for i in range(len(bases))
                                 if i == len(bases) - 1 or bases[i + 1] > recovery_point), 0)
    truncated_at = None
    for i, base in enumerate(bases):
        if segments and segments[-1].next_offset != base:
            # A recovered segment ends short of the next one's base (its tail never reached
            # the disk): what follows would leave a hole in the offsets, so it goes too.
            log.warning("%s: segment %d ends at offset %d, before the next segment %d",
                        directory.name, segments[-1].base_offset, segments[-1].next_offset, base)
            truncated_at = i - 1
            break
        is_last = i == len(bases) - 1
        segment = None
        if i < first_to_recover and base not in swapped:
            try:
                segment = open_segment(base, active=False)
                segment.check_index_consistency()
                if is_last:
                    segment.load_next_offset()
                else:
                    segment.next_offset = bases[i + 1]
            except (CorruptIndexError, CorruptRecordError) as exc:
                log.warning("%s: segment %d needs recovery: %s", directory.name, base, exc)
                if segment is not None:
                    segment.close()
                segment = None
        if segment is None:
            segment = open_segment(base, active=True, fresh=True)
            continuity.start_segment(base, gaps_allowed=base in swapped)
            cut = segment.recover(continuity)
            recovered.append(segment)
            if not is_last:
                segment.make_inactive()
            if cut:
                truncated_at = i
        segments.append(segment)
        if truncated_at is not None:
            break
    if truncated_at is not None and truncated_at < len(bases) - 1:
        later = bases[truncated_at + 1:]
        log.warning("%s: deleting %d segment(s) after the corrupt data: %s", directory.name,
                    len(later), ", ".join(map(str, later)))
        for base in later:
            _delete_segment_files(directory, base)
    # An empty segment left in the middle by truncation is fine; an empty log needs one.
    start = max(log_start_offset or 0, segments[0].base_offset if segments else 0)
    if not segments or start > segments[-1].next_offset:
        if segments:
            log.warning("%s: log start offset %d is past the recovered end %d; starting empty at %d",
                        directory.name, start, segments[-1].next_offset, start)
            for segment in segments:
                segment.close()
                _delete_segment_files(directory, segment.base_offset)
            recovered = []
        segment = open_segment(start, active=True, fresh=True, new=True)
        segment.next_offset = start
        segments = [segment]
        recovered.append(segment)
    active = segments[-1]
    if not active.offset_index.active:
        active.make_active()
    end_offset = active.next_offset
    end_offset_holder[0] = end_offset

    if not epochs_trusted:
        _rebuild_epochs(epochs, segments)
    epochs.truncate_from_end(end_offset)
    epochs.truncate_from_start(start)

    if recovered:
        for segment in recovered:
            segment.flush()
            segment.needs_dir_sync = False
        fsync_dir(directory)

    return RecoveredLog(topic, partition, segments, start, end_offset, epochs, len(recovered), started)


def log_loaded(directory: Path, recovered: RecoveredLog, clean_shutdown: bool) -> None:
    """The one line a loaded partition log is worth (once its producer state is replayed)."""
    log.info("loaded %s: offsets [%d, %d), %d segment(s), %d recovered, %s shutdown, in %.1f ms",
             directory.name, recovered.log_start_offset, recovered.log_end_offset, len(recovered.segments),
             recovered.recovered_segments, "clean" if clean_shutdown else "unclean",
             (time.monotonic() - recovered.started) * 1000)


def _rebuild_epochs(epochs: LeaderEpochCache, segments: list[LogSegment]) -> None:
    """Recreate the leader epoch cache from the batches' partition leader epochs."""
    epochs.clear(flush=False)
    for segment in segments:
        for header in segment.iter_headers(0):
            epoch = header.partition_leader_epoch
            if epoch >= 0 and epoch > epochs.latest_epoch:
                epochs.assign(epoch, header.base_offset, flush=False)
    epochs.flush()
