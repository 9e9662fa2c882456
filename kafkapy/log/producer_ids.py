"""Producer id allocation for InitProducerId, unique across broker restarts and crashes.

Ids are handed out from blocks (1000 by default, like Kafka's ProducerIdManager). Before the first
id of a block is returned, the block's end is written to a small file atomically (temp file, fsync,
rename, directory fsync). After a restart -- clean or SIGKILL -- allocation resumes at the persisted
block end, so the unused rest of the last block is skipped and no id is ever handed out twice.

File format (JSON, one object): {"version": 1, "block_end": <next id to reserve from>}.
A file that exists but cannot be parsed is an error, never a reason to start again at 0.
"""
from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path

from kafkapy.protocol.errors import KafkaError

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_BLOCK_SIZE", "ProducerIdAllocator", "ProducerIdStoreError"]

DEFAULT_BLOCK_SIZE = 1000
_FORMAT_VERSION = 1
_MAX_PRODUCER_ID = 2**63 - 1


class ProducerIdStoreError(KafkaError):
    """The producer id file is unreadable or producer ids are exhausted (UNKNOWN_SERVER_ERROR)."""


class ProducerIdAllocator:
    """Hands out producer ids that never repeat, persisting a reserved block end before use."""

    def __init__(self, path: Path | str, block_size: int = DEFAULT_BLOCK_SIZE):
        if block_size < 1:
            raise ValueError(f"producer id block size must be positive, got {block_size}")
        self.path = Path(path)
        self.block_size = block_size
        self._lock = threading.Lock()
        self._block_end = self._read_block_end()
        # Nothing of the persisted block is known to be unused, so start past all of it.
        self._next = self._block_end

    @property
    def block_end(self) -> int:
        """The persisted bound: every id handed out so far, before or after a crash, is below it."""
        return self._block_end

    def allocate(self) -> int:
        """Return a producer id never returned before by any allocator on this file."""
        with self._lock:
            if self._next >= self._block_end:
                self._reserve_block()
            pid = self._next
            self._next += 1
            return pid

    def _reserve_block(self) -> None:
        if self._next > _MAX_PRODUCER_ID - self.block_size:
            raise ProducerIdStoreError(f"exhausted all producer ids (next {self._next})")
        new_end = self._next + self.block_size
        self._write_block_end(new_end)
        log.info("reserved producer ids [%d, %d) in %s", self._next, new_end, self.path)
        self._block_end = new_end

    def _read_block_end(self) -> int:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return 0
        try:
            data = json.loads(text)
            version = data["version"]
            block_end = data["block_end"]
        except (ValueError, KeyError, TypeError) as exc:
            raise ProducerIdStoreError(f"producer id file {self.path} is unreadable: {exc}") from exc
        if version != _FORMAT_VERSION:
            raise ProducerIdStoreError(f"producer id file {self.path} has unknown version {version!r}")
        if not isinstance(block_end, int) or isinstance(block_end, bool) or block_end < 0:
            raise ProducerIdStoreError(f"producer id file {self.path} has invalid block_end {block_end!r}")
        return block_end

    def _write_block_end(self, block_end: int) -> None:
        data = json.dumps({"version": _FORMAT_VERSION, "block_end": block_end}).encode()
        tmp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        dir_fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
