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
from collections.abc import Callable
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


@dataclass(slots=True)
class FetchContext:
    """What one Fetch request does with its session (Kafka's FetchContext, made by
    FetchManager.newContext, here `FetchSessionCache.new_context`): which partitions it reads and
    which of their answers go into the response.

    - sessionless (`session` None): every partition named is read and answered;
    - full (a new session): the same, and the session remembers them and what was sent;
    - incremental: the session's partitions are read (the request names only changes), and only
      the partitions with news (records, an error, a moved high watermark or log start) are answered;
    - error (`error` set): the request is answered with that error alone.
    """

    session: FetchSession | None = None
    full: bool = True
    error: int = ErrorCode.NONE

    @property
    def session_id(self) -> int:
        return self.session.session_id if self.session is not None else 0

    def include(self, key: tuple, data) -> bool:
        """Whether the answer `data` for partition `key` goes into the response (and, in a session,
        remember what was sent)."""
        session = self.session
        if session is None:
            return True
        state = session.partitions.get(key)
        if state is None:
            return True
        unchanged = (not self.full and data.error_code == 0 and not data.records
                     and data.high_watermark == state.sent_high_watermark
                     and data.log_start_offset == state.sent_log_start_offset)
        state.sent_high_watermark = data.high_watermark
        state.sent_log_start_offset = data.log_start_offset
        return not unchanged

    def answered(self, results: list) -> list:
        """The (wanted, data) pairs of `results` that go into the response, in their order (Kafka's
        FetchContext.updateAndGenerateResponseData): without a session all of them, at no cost per
        partition (librdkafka consumers fetch without sessions); in a session `include` decides for
        each. The wanted entries have `topic` and `partition`."""
        if self.session is None:
            return results
        include = self.include
        return [(want, data) for want, data in results if include((want.topic, want.partition), data)]


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

    def new_context(self, session_id: int, epoch: int, wanted: list, forgotten: list, is_follower: bool,
                    resume: Callable[[tuple, SessionPartition], object]) -> tuple[FetchContext, list]:
        """The context of a Fetch and the partitions it reads (Kafka's FetchManager.newContext).

        `wanted` are the request's partitions (objects with topic, partition, fetch_offset and
        max_bytes), `forgotten` the (topic, partition) keys it drops from its session, and
        `resume(key, state)` makes the wanted entry of a session partition the request does not
        name. Followers get no session (answered with session id 0, they fetch in full every time),
        so that their last fetched epochs and log start offsets are always in the request."""
        session = None
        created = False
        if session_id == 0:
            if epoch == INITIAL_EPOCH:
                if not is_follower:
                    session = self.new_session()
                    created = True
            elif epoch != FINAL_EPOCH:
                return FetchContext(error=ErrorCode.INVALID_FETCH_SESSION_EPOCH), []
        elif epoch == FINAL_EPOCH:
            self.remove(session_id)
        elif epoch == INITIAL_EPOCH:
            # a full fetch naming an existing session closes it and opens a new one (Kafka's
            # FetchSession: clients do this to reset a session after an error)
            self.remove(session_id)
            if not is_follower:
                session = self.new_session()
                created = True
        else:
            try:
                session = self.get(session_id, epoch)
            except KafkaError as exc:
                return FetchContext(error=exc.code), []
        full = session is None or created
        if session is None:
            return FetchContext(None, True), wanted
        partitions = session.partitions
        if full:
            partitions.clear()
        for key in forgotten:
            partitions.pop(key, None)
        for want in wanted:
            key = (want.topic, want.partition)
            state = partitions.get(key)
            if state is None:
                partitions[key] = SessionPartition(want.fetch_offset, want.max_bytes)
            else:
                state.fetch_offset = want.fetch_offset
                state.max_bytes = want.max_bytes
        if not full:
            by_key = {(w.topic, w.partition): w for w in wanted}
            wanted = [by_key.get(key) or resume(key, state) for key, state in partitions.items()]
        if not created:  # a new session already expects epoch 1 next
            session.epoch += 1
        return FetchContext(session, full), wanted

    def remove_topic(self, topic: str) -> None:
        """Forget a deleted topic's partitions in every session."""
        for session in self._sessions.values():
            for key in [k for k in session.partitions if k[0] == topic]:
                del session.partitions[key]

    def __len__(self) -> int:
        return len(self._sessions)
