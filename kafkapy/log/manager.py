"""All partition logs of a broker across its log dirs, with the per-dir checkpoint files.

Each log dir holds `<topic>-<partition>` directories, Kafka's recovery-point,
log-start-offset and replication-offset checkpoints, and the `.kafka_cleanshutdown`
marker written by `close()` and removed once the next `load()` has opened every log.
A partition moves between log dirs (AlterReplicaLogDirs) through `move`, see dir_move.py.
"""
from __future__ import annotations

import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from kafkapy.protocol.errors import ErrorCode, KafkaError

from .checkpoints import (
    CLEAN_SHUTDOWN_MARKER,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CheckpointError,
    fsync_dir,
    read_offset_checkpoint,
    write_atomically,
    write_offset_checkpoint,
)
from .cleaner import CleanerConfig, LogCleaner
from .config import LogConfig
from .dir_health import FULL, OFFLINE, ONLINE, LogDirState, is_out_of_space
from .dir_names import FUTURE_SUFFIX, MOVED_SUFFIX, parse_partition_dir_name
from .errors import KafkaStorageError, LogOfflineError
from .flusher import Flusher
from .storage_faults import StorageFaults

if TYPE_CHECKING:
    from .dir_move import LogDirMover
    from .partition_log import PartitionLog

log = logging.getLogger(__name__)

CHECKPOINT_INTERVAL_S = 60.0  # log.flush.offset.checkpoint.interval.ms
SPACE_PROBE_BYTES = 1 << 20  # what a full log dir must be able to take before it comes back
PRODUCER_EXPIRATION_CHECK_S = 600.0  # producer.id.expiration.check.interval.ms

__all__ = ["LogManager", "OfflinePartitionLog"]


class OfflinePartitionLog:
    """Stands in for a partition whose files could not be loaded: every operation raises
    KAFKA_STORAGE_ERROR, while every other partition keeps serving."""

    def __init__(self, directory: Path, topic: str, partition: int, config: LogConfig, reason: str):
        self.dir = directory
        self.topic = topic
        self.partition = partition
        self.config = config
        self.offline_reason = reason
        self.is_offline = True
        self.log_start_offset = -1
        self.log_end_offset = -1
        self.high_watermark = -1
        self.last_stable_offset = -1

    def size_in_bytes(self) -> int:
        return 0

    @property
    def log_dir(self) -> Path:
        return self.dir.parent

    def update_config(self, config: LogConfig) -> None:
        self.config = config

    def close(self) -> None:
        pass

    def __getattr__(self, name: str):
        # Any operation of a PartitionLog (append, read, ...) fails with the storage error.
        def offline(*args, **kwargs):
            raise LogOfflineError(f"partition {self.dir.name} is offline: {self.offline_reason}")

        return offline


def _moves_left_on_disk(log_dirs: list[Path]) -> bool:
    """Whether any log dir holds what an interrupted move between log dirs leaves behind."""
    for log_dir in log_dirs:
        try:
            names = os.listdir(log_dir)
        except OSError:
            continue
        if any(name.endswith((FUTURE_SUFFIX, MOVED_SUFFIX)) for name in names):
            return True
    return False


class LogManager:
    """Opens, creates, deletes and maintains every partition log of this broker."""

    def __init__(self, log_dirs: list[str], default_config: LogConfig, *, cleaner_enable: bool = True,
                 cleaner_backoff_ms: int = 15000, cleaner_config: CleanerConfig | None = None):
        if not log_dirs:
            raise ValueError("at least one log dir is needed")
        self.log_dirs = [Path(d) for d in log_dirs]
        self.default_config = default_config
        self.flusher = Flusher("kafkapy-log-flusher")
        self._logs: dict[tuple[str, int], PartitionLog | OfflinePartitionLog] = {}
        self.offline: dict[tuple[str, int], str] = {}
        self._topic_configs: dict[str, LogConfig] = {}
        self._last_checkpoint = time.monotonic()
        self._last_producer_expiry = time.monotonic()
        # Checkpoint writes may be queued on the flusher: one computed earlier never overwrites a later one.
        self._checkpoint_lock = threading.Lock()
        self._checkpoint_seq = 0
        self._checkpoint_written = 0
        self._closed = False
        # Each log dir's health (dir_health.py); listeners hear of every change, from any thread
        self.dir_states = {d: LogDirState(d) for d in self.log_dirs}
        self.dir_listeners: list = []
        self._dir_lock = threading.Lock()
        self.storage_faults = StorageFaults(self.log_dirs)
        self._mover: LogDirMover | None = None  # built on the first move (AlterReplicaLogDirs)
        # log.cleaner.*: compaction of cleanup.policy=compact logs; its checkpoints are kept
        # (cleaner-offset-checkpoint) even when it does not run.
        if cleaner_config is None:
            cleaner_config = CleanerConfig(enable=cleaner_enable, backoff_ms=cleaner_backoff_ms)
        self.cleaner = LogCleaner(self._cleanable_logs, config=cleaner_config, all_logs=self.all_logs,
                                  log_dirs=self.log_dirs)
        self.cleaner.start()

    @property
    def mover(self) -> LogDirMover:
        """The moves between log dirs (dir_move.py), built when first asked for: a broker that never
        moves a partition never imports it."""
        if self._mover is None:
            from .dir_move import LogDirMover

            # Kafka's default for num.replica.alter.log.dirs.threads: one per log dir.
            self._mover = LogDirMover(self, threads=len(self.log_dirs))
        return self._mover

    def moves(self) -> list:
        """The moves between log dirs in progress (none without a mover)."""
        return [] if self._mover is None else self._mover.moves()

    # ---------------------------------------------------------------- loading
    def load(self, topic_configs: dict[str, LogConfig] | None = None) -> None:
        """Open every `<topic>-<partition>` dir of every log dir, recovering as needed."""
        if topic_configs:
            self._topic_configs.update(topic_configs)
        if _moves_left_on_disk(self.log_dirs):
            from .dir_move import clean_interrupted_moves

            clean_interrupted_moves(self.log_dirs)
        for log_dir in self.log_dirs:
            self._load_dir(log_dir)

    def _load_dir(self, log_dir: Path) -> None:
        log_dir.mkdir(parents=True, exist_ok=True)
        marker = log_dir / CLEAN_SHUTDOWN_MARKER
        clean = marker.exists()
        recovery_points = self._read_checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT)
        if recovery_points is None:
            recovery_points, clean = {}, False  # unreadable: recover everything from the start
        start_offsets = self._read_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT) or {}
        cleaned_up_to = self.cleaner.load_checkpoint(log_dir)
        started = time.monotonic()
        count = 0
        for name in sorted(os.listdir(log_dir)):
            path = log_dir / name
            if not path.is_dir():
                continue
            if name.endswith("-delete"):
                log.info("removing partition dir %s left by a topic deletion", path)
                import shutil  # (bz2, lzma, zlib with it) not at start-up

                shutil.rmtree(path, ignore_errors=True)
                continue
            if name.endswith((FUTURE_SUFFIX, MOVED_SUFFIX, "-stray")):
                log.warning("ignoring partition dir %s (stray replicas are not supported)", path)
                continue
            try:
                key = parse_partition_dir_name(name)
            except ValueError:
                continue
            if key in self._logs:
                log.error("partition %s-%d exists in two log dirs; ignoring %s", key[0], key[1], path)
                continue
            config = self._topic_configs.get(key[0], self.default_config)
            from .partition_log import PartitionLog  # imported with the first partition found

            try:
                self._logs[key] = self._attach(PartitionLog.open(
                    path, config, recovery_point=recovery_points.get(key, 0),
                    log_start_offset=start_offsets.get(key), clean_shutdown=clean, flusher=self.flusher))
                if key in cleaned_up_to:
                    self._logs[key].cleaner_checkpoint = cleaned_up_to[key]
                count += 1
            except Exception as exc:  # one bad partition must not stop the others
                reason = f"{type(exc).__name__}: {exc}"
                log.error("partition %s-%d in %s is offline: cannot load it: %s", key[0], key[1],
                          log_dir, reason)
                self.offline[key] = reason
                self._logs[key] = OfflinePartitionLog(path, key[0], key[1], config, reason)
        if marker.exists():
            marker.unlink()
            fsync_dir(log_dir)
        log.info("loaded %d partition log(s) from %s (%s shutdown) in %.1f ms", count, log_dir,
                 "clean" if clean else "unclean", (time.monotonic() - started) * 1000)

    @staticmethod
    def _read_checkpoint(path: Path) -> dict[tuple[str, int], int] | None:
        try:
            return read_offset_checkpoint(path)
        except (CheckpointError, OSError) as exc:
            log.warning("ignoring unreadable checkpoint file: %s", exc)
            return None

    # ---------------------------------------------------------------- lookups
    def get(self, topic: str, partition: int) -> PartitionLog | None:
        """The partition's log (an OfflinePartitionLog if it could not be loaded), or None."""
        return self._logs.get((topic, partition))

    def all_logs(self) -> dict[tuple[str, int], PartitionLog]:
        return dict(self._logs)

    def _online_logs(self) -> list[PartitionLog]:
        return [plog for plog in self._logs.values()
                if not isinstance(plog, OfflinePartitionLog) and not plog.is_offline]

    def _cleanable_logs(self) -> list[PartitionLog]:
        # As Kafka pauses cleaning during a move: a swap would land in the dir being left.
        mover = self._mover
        return [plog for plog in self._online_logs() if mover is None or not mover.is_moving(plog)]

    # ---------------------------------------------------------------- create / delete / config
    def create(self, topic: str, partition: int, config: LogConfig | None = None) -> PartitionLog:
        """The log of (topic, partition), created in the least loaded log dir if missing."""
        key = (topic, partition)
        if config is not None:
            self._topic_configs[topic] = config
        config = self._topic_configs.get(topic, self.default_config)
        existing = self._logs.get(key)
        if existing is not None:
            if config is not existing.config:
                existing.update_config(config)
            return existing
        if len(self.log_dirs) == 1:
            log_dir = self.log_dirs[0]   # no choice to make: no walk over every log per new partition
            if not self.dir_states[log_dir].online:
                raise KafkaStorageError(f"log dir {log_dir} is {self.dir_states[log_dir].status}: "
                                        f"{self.dir_states[log_dir].reason}")
        else:
            # as Kafka, new logs go to online dirs only
            counts = {d: 0 for d in self.log_dirs if self.dir_states[d].online}
            if not counts:
                raise KafkaStorageError("no log dir is online")
            for plog in self._logs.values():
                parent = plog.dir.parent
                if parent in counts:
                    counts[parent] += 1
            log_dir = min(counts, key=lambda d: counts[d])
        log_dir.mkdir(parents=True, exist_ok=True)
        path = log_dir / f"{topic}-{partition}"
        created = not path.exists()
        # A brand-new directory has nothing to recover.
        from .partition_log import PartitionLog

        plog = self._attach(PartitionLog.open(path, config, flusher=self.flusher, clean_shutdown=created))
        if created:
            fsync_dir(log_dir)
        self._logs[key] = plog
        log.info("created log for partition %s-%d in %s", topic, partition, log_dir)
        return plog

    def delete(self, topic: str, partition: int) -> None:
        """Close the log and remove its directory (renamed `...-delete` first, like Kafka)."""
        key = (topic, partition)
        if self._mover is not None:
            self._mover.cancel(topic, partition, "the partition is deleted")
        plog = self._logs.pop(key, None)
        self.offline.pop(key, None)
        if plog is None:
            return
        if not isinstance(plog, OfflinePartitionLog):
            plog.close()
        # as Kafka's UnifiedLog.logDeleteDirName: the topic is cut so that the name stays within the
        # file system's 255 bytes (a 249-character topic plus the suffix would not)
        suffix = f"-{partition}.{os.urandom(16).hex()}-delete"  # a random UUID's 32 hex digits
        target = plog.dir.with_name(topic[:max(0, 255 - len(suffix))] + suffix)
        try:
            os.rename(plog.dir, target)
            fsync_dir(target.parent)
        except OSError as exc:
            log.error("could not rename %s for deletion: %s", plog.dir, exc)
            return
        import shutil  # (bz2, lzma, zlib with it) not at start-up

        self.flusher.submit(lambda: shutil.rmtree(target, ignore_errors=True))
        self.cleaner.forget(topic, partition)
        log.info("deleted log of partition %s-%d", topic, partition)

    def move(self, topic: str, partition: int, log_dir: str | os.PathLike) -> None:
        """Move the partition's log into `log_dir`, one of the log dirs (AlterReplicaLogDirs), in
        the background (dir_move.py); nothing to do if it is there or on its way there. As in
        Kafka, a move toward another dir is cancelled first. Needs a running event loop.

        Raises KafkaError with LOG_DIR_NOT_FOUND, REPLICA_NOT_AVAILABLE or KAFKA_STORAGE_ERROR.
        """
        wanted = os.path.abspath(log_dir)
        target = next((d for d in self.log_dirs if os.path.abspath(d) == wanted), None)
        if target is None:
            raise KafkaError(f"{log_dir} is not one of the log dirs", code=ErrorCode.LOG_DIR_NOT_FOUND)
        plog = self._logs.get((topic, partition))
        if plog is None:
            raise KafkaError(f"no log for {topic}-{partition}", code=ErrorCode.REPLICA_NOT_AVAILABLE)
        if isinstance(plog, OfflinePartitionLog) or plog.is_offline:
            raise KafkaStorageError(f"partition {topic}-{partition} is offline")
        current = self.mover.get(topic, partition)
        if current is not None:
            if current.log_dir == target:
                return
            self.mover.cancel(topic, partition, f"asked to move to {target} instead")
        if plog.dir.parent != target:
            self.mover.start(plog, target)

    def update_config(self, topic: str, config: LogConfig) -> None:
        self._topic_configs[topic] = config
        for (name, _), plog in self._logs.items():
            if name == topic:
                plog.update_config(config)

    # ---------------------------------------------------------------- log dir failures
    def _attach(self, plog: PartitionLog) -> PartitionLog:
        """Wire a log to the storage faults and the failure handling of its dir."""
        plog.storage_faults = self.storage_faults
        plog.io_error_handler = self._on_io_error
        state = self.dir_states.get(plog.dir.parent)
        if state is not None and state.status == FULL:
            plog.refuse_writes(state.reason or "the log dir is full")
        elif state is not None and state.status == OFFLINE:
            plog._mark_offline(state.reason or "the log dir is offline")
        return plog

    def dir_state(self, log_dir: str | os.PathLike) -> LogDirState | None:
        wanted = os.path.abspath(log_dir)
        return next((s for d, s in self.dir_states.items() if os.path.abspath(d) == wanted), None)

    def _logs_in(self, log_dir: Path) -> list[PartitionLog]:
        return [p for p in list(self._logs.values()) if not isinstance(p, OfflinePartitionLog) and p.dir.parent == log_dir]

    def _on_io_error(self, plog: PartitionLog, reason: str, exc: OSError) -> None:
        """A write or fsync in `plog` failed (any thread): the whole log dir goes offline, as
        Kafka's LogDirFailureChannel has it, or is full when space is all it lacks."""
        log_dir = plog.dir.parent
        state = self.dir_states.get(log_dir)
        if state is None:  # a log outside the log dirs (a move's destination copy): alone
            plog._mark_offline(reason)
            return
        full = is_out_of_space(exc)
        with self._dir_lock:
            if state.status == OFFLINE or (full and state.status == FULL):
                changed = False
            else:
                state.status = FULL if full else OFFLINE
                state.reason = f"{plog.dir.name}: {reason}"
                state.since = time.time()
                state.failures += 1
                changed = True
            logs = self._logs_in(log_dir)
        for other in logs:
            if full:
                other.refuse_writes(state.reason)
            else:
                other._mark_offline(state.reason)
        if full:
            plog.refuse_writes(state.reason)
        else:
            plog._mark_offline(state.reason)
        if changed:
            if full:
                log.error("log dir %s is full: %d partition(s) refuse writes until space is free again "
                          "(reads go on): %s", log_dir, len(logs), state.reason)
            else:
                log.error("log dir %s is offline after an I/O error: its %d partition(s) answer "
                          "KAFKA_STORAGE_ERROR until a restart: %s", log_dir, len(logs), state.reason)
            self._tell_listeners(state)

    def _tell_listeners(self, state: LogDirState) -> None:
        for listener in list(self.dir_listeners):
            try:
                listener(state)
            except Exception:
                log.exception("log dir listener failed for %s", state.path)

    def recheck_full_dirs(self, min_interval_s: float = 0.0) -> list[Path]:
        """Bring back the full log dirs that have space again (blocking: run it off the event
        loop): a probe write and fsync must succeed, then every log of the dir cuts what a failed
        write left, is flushed, and takes appends again. Returns the dirs that came back."""
        back = []
        now = time.monotonic()
        for log_dir, state in self.dir_states.items():
            if state.status != FULL or now - state.last_probe < min_interval_s or self._closed:
                continue
            state.last_probe = now
            if self.storage_faults.blocks_dir(log_dir):
                continue
            try:
                self._probe_space(log_dir)
                for plog in self._logs_in(log_dir):
                    plog.resume_writes()
            except OSError as exc:
                log.debug("log dir %s is still full: %s", log_dir, exc)
                continue
            with self._dir_lock:
                if state.status != FULL:
                    continue
                was, full_for = state.reason, time.time() - state.since
                state.status, state.reason, state.since = ONLINE, None, time.time()
                state.recoveries += 1
            import shutil  # (bz2, lzma, zlib with it) not at start-up

            log.warning("log dir %s is back online: space is free again (%d bytes free); it was full for "
                        "%.1f s: %s", log_dir, shutil.disk_usage(log_dir).free, full_for, was)
            self._tell_listeners(state)
            back.append(log_dir)
        return back

    @staticmethod
    def _probe_space(log_dir: Path) -> None:
        """Write, fsync and remove SPACE_PROBE_BYTES in `log_dir`; OSError if it does not fit."""
        import shutil  # (bz2, lzma, zlib with it) not at start-up

        if shutil.disk_usage(log_dir).free < 2 * SPACE_PROBE_BYTES:
            raise OSError(28, "less than 2 MiB free")
        probe = log_dir / ".kafkapy-space-probe"
        try:
            fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                chunk = bytes(64 << 10)
                for _ in range(SPACE_PROBE_BYTES // len(chunk)):
                    os.write(fd, chunk)
                os.fsync(fd)
            finally:
                os.close(fd)
        finally:
            try:
                os.unlink(probe)
            except FileNotFoundError:
                pass

    # ---------------------------------------------------------------- periodic work
    def run_retention(self) -> None:
        """Delete segments past retention.ms / retention.bytes / the log start offset."""
        now_ms = time.time_ns() // 1_000_000
        expire = time.monotonic() - self._last_producer_expiry >= PRODUCER_EXPIRATION_CHECK_S
        if expire:
            self._last_producer_expiry = time.monotonic()
        changed = False
        for plog in self._online_logs():
            try:
                changed |= plog.delete_old_segments(now_ms) > 0
                if expire:
                    plog.producer_state.remove_expired(now_ms)
            except KafkaError as exc:
                log.error("retention of %s failed: %s", plog.dir.name, exc)
        if changed:
            self.write_checkpoints(background=True)

    def flush_dirty(self) -> None:
        """flush.ms: queue flushes of logs with old unflushed data; checkpoint every minute."""
        now_ms = time.time_ns() // 1_000_000
        for plog in self._online_logs():
            plog.flush_if_due(now_ms)
        if time.monotonic() - self._last_checkpoint >= CHECKPOINT_INTERVAL_S:
            self.write_checkpoints(background=True)

    def write_checkpoints(self, background: bool = False, *,
                          also_in: dict[tuple[str, int], Path] | None = None) -> None:
        """Write every log dir's recovery-point, log-start-offset and replication checkpoints;
        `also_in` lists partitions in a second log dir as well (a move about to switch dirs)."""
        self._last_checkpoint = time.monotonic()
        self._checkpoint_seq += 1
        seq = self._checkpoint_seq
        online = [p for p in self._logs.values() if not isinstance(p, OfflinePartitionLog) and not p.is_offline]
        also_in = also_in or {}
        files = []
        for log_dir in self.log_dirs:
            if self.dir_states[log_dir].status == OFFLINE:
                continue  # as Kafka: nothing more is written to a failed dir
            logs = [p for p in online
                    if p.dir.parent == log_dir or also_in.get((p.topic, p.partition)) == log_dir]
            recovery = {(p.topic, p.partition): p.recovery_point for p in logs}
            # Kafka only records a start offset that differs from the first segment's base.
            starts = {(p.topic, p.partition): p.log_start_offset for p in logs
                      if p.log_start_offset > p.segments[0].base_offset}
            marks = {(p.topic, p.partition): p.high_watermark for p in logs}
            files += [(log_dir / RECOVERY_POINT_CHECKPOINT, recovery),
                      (log_dir / LOG_START_OFFSET_CHECKPOINT, starts),
                      (log_dir / REPLICATION_OFFSET_CHECKPOINT, marks)]

        def write() -> None:
            with self._checkpoint_lock:
                if seq < self._checkpoint_written:
                    return  # a later state is on disk already
                for path, offsets in files:
                    try:
                        write_offset_checkpoint(path, offsets)
                    except OSError as exc:
                        log.error("could not write checkpoint %s: %s", path, exc)
                self._checkpoint_written = seq

        if background and not self._closed:
            self.flusher.submit(write)
        else:
            write()

    def close(self) -> None:
        """Flush every log, write checkpoints and the clean-shutdown marker of each log dir."""
        if self._closed:
            return
        if self._mover is not None:
            self._mover.close()  # moves are dropped: each log stays where it is
        self.cleaner.stop()
        failed_dirs = set()
        for key, plog in self._logs.items():
            if isinstance(plog, OfflinePartitionLog) or plog.is_offline:
                failed_dirs.add(plog.dir.parent)
                continue
            try:
                plog.close()
            except Exception as exc:
                failed_dirs.add(plog.dir.parent)
                log.error("closing log %s-%d failed: %s", key[0], key[1], exc)
        self._closed = True
        self.write_checkpoints()
        self.cleaner.write_checkpoints()
        self.flusher.stop()
        for log_dir in self.log_dirs:
            if log_dir in failed_dirs or not self.dir_states[log_dir].online:
                log.warning("not marking %s as cleanly shut down: it has offline partitions", log_dir)
                continue
            try:
                write_atomically(log_dir / CLEAN_SHUTDOWN_MARKER,
                                 json.dumps({"version": 0, "brokerEpoch": -1}).encode())
            except OSError as exc:
                log.error("could not write the clean-shutdown marker in %s: %s", log_dir, exc)
        log.info("log manager closed (%d partition logs)", len(self._logs))

