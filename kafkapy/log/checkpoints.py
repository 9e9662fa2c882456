"""Kafka's text checkpoint files, written atomically (temp file, fsync, rename, fsync dir).

Per log dir: recovery-point-offset-checkpoint, log-start-offset-checkpoint and
replication-offset-checkpoint hold "topic partition offset" lines; per partition dir,
leader-epoch-checkpoint holds "epoch start_offset" lines. Every file is:

    0            <- version
    <count>
    <count lines>
"""
from __future__ import annotations

import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"
CHECKPOINT_VERSION = 0

__all__ = [
    "CLEAN_SHUTDOWN_MARKER", "LEADER_EPOCH_CHECKPOINT", "LOG_START_OFFSET_CHECKPOINT",
    "RECOVERY_POINT_CHECKPOINT", "REPLICATION_OFFSET_CHECKPOINT", "CheckpointError",
    "fsync_dir", "read_epoch_checkpoint", "read_offset_checkpoint", "write_atomically",
    "write_epoch_checkpoint", "write_offset_checkpoint",
]


class CheckpointError(ValueError):
    """A checkpoint file that does not parse (callers fall back to a safe default)."""


def fsync_dir(path: str | os.PathLike) -> None:
    """fsync a directory so renames, creations and deletions inside it are durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: str | os.PathLike, data: bytes) -> None:
    """Replace `path` with `data` so that a crash leaves either the old or the new file."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def _format(lines: list[str]) -> bytes:
    return ("\n".join([str(CHECKPOINT_VERSION), str(len(lines)), *lines]) + "\n").encode()


def _parse(path: Path, fields: int) -> list[list[str]]:
    data = path.read_bytes()
    if not data:
        # a file created but never written (a crash between create and write, or a Kafka broker
        # that made the leader-epoch-checkpoint before its first epoch): Kafka's
        # CheckpointReadBuffer reads no version line as no entries, and so do we
        return []
    text = data.decode("utf-8", errors="strict")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < 2:
        raise CheckpointError(f"{path}: missing version or count line")
    if lines[0].strip() != str(CHECKPOINT_VERSION):
        raise CheckpointError(f"{path}: unsupported version {lines[0]!r}")
    try:
        count = int(lines[1])
    except ValueError:
        raise CheckpointError(f"{path}: malformed count line {lines[1]!r}") from None
    entries = lines[2:]
    if count != len(entries):
        raise CheckpointError(f"{path}: expected {count} entries, found {len(entries)}")
    parsed = []
    for line in entries:
        parts = line.split(" ")
        if len(parts) != fields:
            raise CheckpointError(f"{path}: malformed line {line!r}")
        parsed.append(parts)
    return parsed


def read_offset_checkpoint(path: str | os.PathLike) -> dict[tuple[str, int], int]:
    """Parse a "topic partition offset" checkpoint; a missing or 0-byte file is empty.

    Raises CheckpointError on a malformed file.
    """
    path = Path(path)
    if not path.exists():
        return {}
    out = {}
    try:
        for topic, partition, offset in _parse(path, 3):
            out[(topic, int(partition))] = int(offset)
    except (ValueError, UnicodeDecodeError) as exc:
        if isinstance(exc, CheckpointError):
            raise
        raise CheckpointError(f"{path}: {exc}") from None
    return out


def write_offset_checkpoint(path: str | os.PathLike, offsets: dict[tuple[str, int], int]) -> None:
    lines = [f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(offsets.items())]
    write_atomically(path, _format(lines))


def read_epoch_checkpoint(path: str | os.PathLike) -> list[tuple[int, int]]:
    """Parse a leader-epoch-checkpoint into (epoch, start_offset) pairs; a missing or 0-byte file is empty."""
    path = Path(path)
    if not path.exists():
        return []
    try:
        return [(int(epoch), int(offset)) for epoch, offset in _parse(path, 2)]
    except (ValueError, UnicodeDecodeError) as exc:
        if isinstance(exc, CheckpointError):
            raise
        raise CheckpointError(f"{path}: {exc}") from None


def write_epoch_checkpoint(path: str | os.PathLike, entries: list[tuple[int, int]]) -> None:
    write_atomically(path, _format([f"{epoch} {offset}" for epoch, offset in entries]))
