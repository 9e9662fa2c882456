"""Incremental fetch sessions (KIP-227): the broker remembers a client's partition set.

A full fetch (epoch 0) may open a session; later fetches with the session id and the next
epoch send only changed partitions, and the response carries only partitions with news
(records, an error, or a moved high watermark / log start offset).
"""
from __future__ import annotations

import itertools
import random
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from ..protocol.errors import ErrorCode, KafkaError

INITIAL_EPOCH = 0
FINAL_EPOCH = -1


@dataclass(slots=True)
class SessionPartition:
    """What the session remembers of one partition between fetches."""

    fetch_offset: int
    max_bytes: int
    log_start_offset: int = -1
    # Last values sent to the client, to decide whether an incremental response includes it.
    sent_high_watermark: int = -1
    sent_log_start_offset: int = -1


@dataclass(slots=True)
class FetchSession:
    """An open session: its id, the epoch the next request must carry, and its partitions."""

    session_id: int
    epoch: int
    partitions: OrderedDict = field(default_factory=OrderedDict)  # (topic, partition) -> SessionPartition
    last_used: float = 0.0


class FetchSessionError(KafkaError):
    """A session id or epoch that does not match (FETCH_SESSION_ID_NOT_FOUND / INVALID_FETCH_SESSION_EPOCH)."""


class FetchSessionCache:
    """Open fetch sessions, bounded by `max_sessions` (max.incremental.fetch.session.cache.slots)."""

    def __init__(self, max_sessions: int = 1000, idle_timeout_s: float = 120.0):
        self.max_sessions = max_sessions
        self.idle_timeout_s = idle_timeout_s
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()
        self._ids = itertools.count(random.randint(1, 1 << 20))

    def new_session(self) -> FetchSession | None:
        """Open a session if there is room (after evicting idle ones); None means sessionless."""
        now = time.monotonic()
        while self._sessions:
            oldest_id, oldest = next(iter(self._sessions.items()))
            if now - oldest.last_used > self.idle_timeout_s or len(self._sessions) >= self.max_sessions:
                del self._sessions[oldest_id]
            else:
                break
        if len(self._sessions) >= self.max_sessions:
            return None
        session_id = next(self._ids) & 0x7FFFFFFF or next(self._ids)
        session = FetchSession(session_id=session_id, epoch=1, last_used=now)
        self._sessions[session_id] = session
        return session

    def get(self, session_id: int, epoch: int) -> FetchSession:
        """Look up the session for an incremental fetch, checking its epoch."""
        session = self._sessions.get(session_id)
        if session is None:
            raise FetchSessionError(f"fetch session {session_id} not found",
                                    ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            raise FetchSessionError(f"fetch session {session_id} expected epoch {session.epoch}, got {epoch}",
                                    ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        self._sessions.move_to_end(session_id)
        session.last_used = time.monotonic()
        return session

    def remove(self, session_id: int) -> None:
        self._sessions.pop(session_id, None)

    def remove_topic(self, topic: str) -> None:
        """Forget a deleted topic's partitions in every session."""
        for session in self._sessions.values():
            for key in [k for k in session.partitions if k[0] == topic]:
                del session.partitions[key]

    def __len__(self) -> int:
        return len(self._sessions)
