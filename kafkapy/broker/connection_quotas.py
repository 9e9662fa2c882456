"""Connection limits, as Kafka's kafka.network.ConnectionQuotas applies them at accept time.

- max.connections.per.ip and max.connections.per.ip.overrides ("host:count,ip:count"): a new
  connection from an address that already has its maximum is closed at once (Kafka: the same).
- max.connections (broker-wide) and listener.name.<listener>.max.connections: Kafka's acceptor
  stops accepting until a connection closes, so new clients wait in the listen backlog. asyncio
  has already accepted the socket when kafkapy sees it, so kafkapy does the equivalent: the new
  connection is not read from until a slot frees (FIFO, head of line), and at most
  socket.listen.backlog.size connections wait that way; beyond that they are closed. The
  inter-broker listener is exempt from the broker-wide limit (Kafka also closes another
  listener's least recently used connection to make room; kafkapy does not).
- max.connection.creation.rate (broker-wide, not on the inter-broker listener) and
  listener.name.<listener>.max.connection.creation.rate: Kafka delays the acceptor so that the
  rate stays below the quota; kafkapy delays the first read of the new connection the same way
  (a token bucket of `rate` connections per second, burst `rate`).
- connections.max.idle.ms: connections with no request in progress and no bytes read or written
  for that long are closed (Kafka's Selector idle expiry).

Every limit except connections.max.idle.ms is a dynamic broker config, read on each accept.
"""
from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections import deque
from typing import Callable, Protocol

from .log_throttle import PeerLogThrottle

log = logging.getLogger(__name__)

INT_MAX = 2**31 - 1


def parse_ip_overrides(text: str, resolve: Callable[[str], str] = socket.gethostbyname) -> dict[str, int]:
    """max.connections.per.ip.overrides ("host:count,ip:count") as {ip: count}; hosts are resolved."""
    overrides: dict[str, int] = {}
    for entry in (text or "").split(","):
        entry = entry.strip()
        if not entry:
            continue
        host, sep, count = entry.rpartition(":")
        if not sep or not host.strip():
            raise ValueError(f"Invalid entry {entry!r}: expected host:count")
        host = host.strip().strip("[]")
        value = int(count.strip())
        if value < 0:
            raise ValueError(f"Invalid entry {entry!r}: the count must not be negative")
        try:
            ip = resolve(host)
        except OSError:
            ip = host
        overrides[ip] = value
    return overrides


class QuotaConnection(Protocol):
    """What the quotas read and call of a connection (connection.KafkaConnection)."""

    quota_state: tuple[str, str] | None
    admitted: bool
    peer: str

    def close(self) -> None: ...

    def admit(self) -> None: ...

    def idle_since(self) -> float: ...

    def wait_for_admission(self) -> None: ...

class _TokenBucket:
    """Kafka's connection creation quota as a bucket of `rate` tokens refilled at `rate`/s."""

    __slots__ = ("rate", "tokens", "updated")

    def __init__(self, rate: float, now: float):
        self.rate = rate
        self.tokens = float(rate)
        self.updated = now

    def delay(self, rate: float, now: float) -> float:
        """Seconds until one more connection may be created at `rate` per second."""
        if rate != self.rate:
            self.rate = rate
            self.tokens = min(self.tokens, float(rate))
        self.tokens = min(float(rate), self.tokens + (now - self.updated) * rate)
        self.updated = now
        return 0.0 if self.tokens >= 1 else (1 - self.tokens) / rate

    def take(self) -> None:
        self.tokens -= 1


class ConnectionQuotas:
    """Counts connections per IP, per listener and in all; admits, delays or closes new ones."""

    def __init__(self, config, inter_broker_listener: str | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.config = config
        self.inter_broker_listener = inter_broker_listener
        self.clock = clock
        self.per_ip: dict[str, int] = {}
        self.per_listener: dict[str, int] = {}
        self.total = 0
        self.rejected = 0
        self._waiting: deque[QuotaConnection] = deque()
        self._buckets: dict[str, _TokenBucket] = {}
        self._overrides_raw: str | None = None
        self._overrides: dict[str, int] = {}
        self._drain_timer: asyncio.TimerHandle | None = None
        self.log = PeerLogThrottle(log)

    # -- limits (read on every accept: they are dynamic) ------------------------------------
    def max_for_ip(self, ip: str) -> int:
        raw = self.config.get("max.connections.per.ip.overrides") or ""
        if raw != self._overrides_raw:
            try:
                self._overrides = parse_ip_overrides(raw)
            except ValueError as exc:
                log.error("ignoring max.connections.per.ip.overrides=%s: %s", raw, exc)
                self._overrides = {}
            self._overrides_raw = raw
        limit = self._overrides.get(ip)
        return self.config.get("max.connections.per.ip") if limit is None else limit

    def _listener_int(self, listener: str, name: str) -> int | None:
        raw = self.config.get(f"listener.name.{listener.lower()}.{name}")
        try:
            return int(raw) if raw is not None else None
        except ValueError:
            return None

    def _has_slot(self, listener: str) -> bool:
        limit = self._listener_int(listener, "max.connections")
        if limit is not None and self.per_listener.get(listener, 0) >= limit:
            return False
        if listener == self.inter_broker_listener:
            return True
        return self.total < self.config.get("max.connections")

    def _rate_delay(self, listener: str, now: float, take: bool) -> float:
        limits = []
        rate = self._listener_int(listener, "max.connection.creation.rate")
        if rate is not None and rate < INT_MAX:
            limits.append((listener, rate))
        rate = self.config.get("max.connection.creation.rate")
        if listener != self.inter_broker_listener and rate < INT_MAX:
            limits.append(("", rate))
        delay = 0.0
        for key, rate in limits:
            if rate <= 0:
                return 1.0  # no new connection at all: look again in a second (the limit is dynamic)
            bucket = self._buckets.get(key)
            if bucket is None:
                bucket = self._buckets[key] = _TokenBucket(rate, now)
            delay = max(delay, bucket.delay(rate, now))
        if take and delay == 0:
            for key, _ in limits:
                self._buckets[key].take()
        return delay

    # -- accept and close --------------------------------------------------------------------
    def on_connect(self, conn: QuotaConnection, listener: str, ip: str) -> bool:
        """A new connection: admitted (True), waiting for a slot or the rate (True, reading paused),
        or closed (False)."""
        count = self.per_ip.get(ip, 0)
        limit = self.max_for_ip(ip)
        if count >= limit:
            self.rejected += 1
            self.log.log(logging.INFO, ip, "Rejected connection from %s, address already has the configured "
                         "maximum of %d connections.", ip, limit)
            conn.close()
            return False
        self.per_ip[ip] = count + 1
        conn.quota_state = (listener, ip)
        if not self._waiting and self._has_slot(listener) and self._rate_delay(listener, self.clock(), True) == 0:
            self._admit(conn, listener)
            return True
        backlog = self.config.get("socket.listen.backlog.size")
        if len(self._waiting) >= backlog:
            self.rejected += 1
            self.log.log(logging.INFO, ip, "Closing connection from %s: %d connections already wait for "
                         "max.connections or max.connection.creation.rate (socket.listen.backlog.size)",
                         ip, len(self._waiting))
            conn.close()
            return False
        conn.wait_for_admission()
        self._waiting.append(conn)
        self._schedule_drain(0.0)
        return True

    def on_close(self, conn: QuotaConnection) -> None:
        state = conn.quota_state
        if state is None:
            return
        conn.quota_state = None
        listener, ip = state
        left = self.per_ip.get(ip, 1) - 1
        if left > 0:
            self.per_ip[ip] = left
        else:
            self.per_ip.pop(ip, None)
        if conn.admitted:
            self.total -= 1
            self.per_listener[listener] = self.per_listener.get(listener, 1) - 1
        else:
            try:
                self._waiting.remove(conn)
            except ValueError:
                pass
        if self._waiting:
            self._schedule_drain(0.0)

    def _admit(self, conn: QuotaConnection, listener: str) -> None:
        self.total += 1
        self.per_listener[listener] = self.per_listener.get(listener, 0) + 1
        conn.admit()

    def _schedule_drain(self, delay: float) -> None:
        if self._drain_timer is not None:
            if delay > 0:
                return
            self._drain_timer.cancel()
        self._drain_timer = asyncio.get_running_loop().call_later(delay, self._drain)

    def _drain(self) -> None:
        """Admit waiting connections in order while slots and the creation rate allow."""
        self._drain_timer = None
        while self._waiting:
            conn = self._waiting[0]
            listener = conn.quota_state[0]
            if not self._has_slot(listener):
                return  # a close drains again
            delay = self._rate_delay(listener, self.clock(), True)
            if delay > 0:
                self._schedule_drain(delay)
                return
            self._waiting.popleft()
            self._admit(conn, listener)

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    # -- idle connections --------------------------------------------------------------------
    def close_idle(self, connections, idle_ms: int) -> int:
        """Close connections with nothing in progress and no traffic for `idle_ms`; returns how many."""
        if idle_ms < 0:
            return 0
        deadline = time.monotonic() - idle_ms / 1000
        closed = 0
        for conn in list(connections):
            if conn.idle_since() < deadline:
                log.debug("closing connection from %s: idle for more than %d ms (connections.max.idle.ms)",
                          conn.peer, idle_ms)
                conn.close()
                closed += 1
        return closed
