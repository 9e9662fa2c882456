"""Rate-limited warning lines about misbehaving peers, so hostile input cannot fill a disk.

Every malformed request, refused frame or rejected connection is worth one line to an operator,
but a client that sends 60,000 bad frames is not worth 60,000 lines. `PeerLogThrottle` writes
the first `first` lines per peer IP in each `interval_s`, counts the rest, and writes one
aggregate line per peer and interval with the count and the last reason. A global cap bounds the
individual lines across all peers in an interval the same way.
"""
from __future__ import annotations

import logging
import time
from typing import Callable

# Individual lines per peer IP per interval before aggregation.
DEFAULT_FIRST = 5
# Individual lines per interval across every peer before aggregation.
DEFAULT_GLOBAL_FIRST = 50
DEFAULT_INTERVAL_S = 60.0


class _PeerWindow:
    __slots__ = ("started", "logged", "suppressed", "last_reason")

    def __init__(self, started: float):
        self.started = started
        self.logged = 0
        self.suppressed = 0
        self.last_reason = ""


class PeerLogThrottle:
    """Writes warnings about one peer IP at most `first` times per interval, then aggregates."""

    def __init__(self, logger: logging.Logger, first: int = DEFAULT_FIRST, interval_s: float = DEFAULT_INTERVAL_S,
                 global_first: int = DEFAULT_GLOBAL_FIRST, clock: Callable[[], float] = time.monotonic):
        self.logger = logger
        self.first = first
        self.interval_s = interval_s
        self.global_first = global_first
        self.clock = clock
        self._peers: dict[str, _PeerWindow] = {}
        self._global_started = clock()
        self._global_logged = 0

    def log(self, level: int, ip: str, msg: str, *args, exc_info: bool = False,
            logger: logging.Logger | None = None) -> None:
        """Log `msg % args` about `ip` now (to `logger`, default the throttle's), or count it for the
        peer's aggregate line."""
        now = self.clock()
        window = self._peers.get(ip)
        if window is not None and now - window.started >= self.interval_s:
            self._flush(ip, window, now)
            window = None
        if window is None:
            window = self._peers[ip] = _PeerWindow(now)
        if now - self._global_started >= self.interval_s:
            self._global_started, self._global_logged = now, 0
        if window.logged < self.first and self._global_logged < self.global_first:
            window.logged += 1
            self._global_logged += 1
            (logger or self.logger).log(level, msg, *args, exc_info=exc_info)
            return
        window.suppressed += 1
        window.last_reason = (msg % args) if args else msg

    def warning(self, ip: str, msg: str, *args, exc_info: bool = False, logger: logging.Logger | None = None) -> None:
        self.log(logging.WARNING, ip, msg, *args, exc_info=exc_info, logger=logger)

    def flush_due(self) -> None:
        """Write the aggregate lines of every peer whose interval has passed (call periodically)."""
        now = self.clock()
        for ip, window in list(self._peers.items()):
            if now - window.started >= self.interval_s:
                self._flush(ip, window, now)

    def flush_all(self) -> None:
        """Write every pending aggregate line now (at shutdown)."""
        now = self.clock()
        for ip, window in list(self._peers.items()):
            self._flush(ip, window, now)

    def _flush(self, ip: str, window: _PeerWindow, now: float) -> None:
        del self._peers[ip]
        if window.suppressed:
            self.logger.warning("%d more warnings about connections from %s in the last %.0f s were not logged "
                                "one by one (%d logged); last: %s", window.suppressed, ip, now - window.started,
                                window.logged, window.last_reason)


def peer_ip(peer: str) -> str:
    """The IP part of a "host:port" peer string (IPv6 addresses keep their colons)."""
    host, sep, _ = peer.rpartition(":")
    return host if sep else peer
