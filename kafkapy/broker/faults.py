"""Fault injection and request recording for test brokers (issue 12).

A `FaultInjector` is attached to a Broker as `broker.faults` (None unless enabled, so the normal
request path costs one attribute check in dispatch.handle_frame). Every decoded request passes
through `FaultInjector.intercept` before its handler: it is recorded, the broker-wide latency is
waited, and the first matching rule decides what happens instead of (or before) the real handler:

- `error`: answer with a well-formed error response for the request (its topics and partitions
  mirrored, the code in every error field; see `error_response`); the handler does not run, so an
  injected Produce error appends nothing.
- `delay_ms`: wait, then run the real handler (with `error`: wait, then answer the error).
- `drop`: never answer. Kafka answers a connection's requests in order, so nothing later on that
  connection is answered either: the connection hangs until the client gives up and closes it.
- `disconnect`: close the connection without answering.

This module holds the rules and their matching; the error answers are built in fault_responses.py
and the recorded requests are fault_records.py's (both re-exported here).

`fault_control.ControlServer` serves the same operations over HTTP+JSON on a loopback port for tests written in
other languages (`kafkapy.control.listener`, `kafkapy serve --ephemeral --control`).
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import random
import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from ..protocol.error_codes import ErrorCode
from ..protocol.messages import REQUEST_TYPES
from .fault_records import RecordedRequest, to_json
from .fault_responses import AdvertisedNode, error_response

if TYPE_CHECKING:
    from ..log.manager import LogManager
    from ..metadata.store import TopicMetadata
    from .config import BrokerConfig
    from .dispatch import RequestContext

__all__ = [
    "API_KEYS", "AdvertisedNode", "CONTROL_LISTENER_CONFIG", "DROP", "FaultInjector", "FaultRule", "RecordedRequest",
    "api_key_of", "api_name_of", "error_code_of", "error_response", "install", "request_partitions", "to_json",
]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _ThisBroker:
    """An injector's broker as AdvertisedNode: its address as advertised now, its cluster id read
    when the answer is built (error_response tolerates a store without one yet)."""

    node_id: int
    advertised_host: str
    advertised_port: int
    _cluster_id: Callable[[], str | None]

    @property
    def cluster_id(self) -> str | None:
        return self._cluster_id()


CONTROL_LISTENER_CONFIG = "kafkapy.control.listener"
DEFAULT_MAX_RECORDED = 10_000

# api name ("Produce", "ApiVersions") -> key, from the generated request classes
API_KEYS: dict[str, int] = {cls.__name__.removesuffix("Request"): key for key, cls in REQUEST_TYPES.items()}
_API_KEYS_FOLDED = {name.lower(): key for name, key in API_KEYS.items()}


class _Drop:
    """The marker `intercept` returns for a request that is never answered."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "DROP"


DROP: Any = _Drop()


def api_key_of(api: str | int) -> int:
    """The api key of `api`: a name ("Produce", case-insensitive, "ProduceRequest" too) or a number."""
    if isinstance(api, bool):
        raise ValueError(f"not an api: {api!r}")
    if isinstance(api, int) or (isinstance(api, str) and api.strip().lstrip("-").isdigit()):
        key = int(api)
        if key not in REQUEST_TYPES:
            raise ValueError(f"unknown api key {key}")
        return key
    folded = str(api).strip().lower().removesuffix("request")
    if folded not in _API_KEYS_FOLDED:
        raise ValueError(f"unknown api {api!r} (e.g. Produce, Fetch, Metadata, JoinGroup)")
    return _API_KEYS_FOLDED[folded]


def api_name_of(key: int) -> str:
    """Kafka's name of an api key ("Produce" for 0)."""
    cls = REQUEST_TYPES.get(key)
    return cls.__name__.removesuffix("Request") if cls is not None else str(key)


def error_code_of(error: str | int) -> int:
    """A Kafka error code from its name ("NOT_LEADER_OR_FOLLOWER", case-insensitive) or number."""
    if isinstance(error, bool):
        raise ValueError(f"not an error code: {error!r}")
    if isinstance(error, int) or (isinstance(error, str) and error.strip().lstrip("-").isdigit()):
        return int(ErrorCode(int(error)))
    try:
        return int(ErrorCode[str(error).strip().upper()])
    except KeyError:
        raise ValueError(f"unknown Kafka error {error!r} (e.g. NOT_LEADER_OR_FOLLOWER)") from None


# -- what a request is about (topic and partition matching) -----------------------------------------
_TOPIC_ATTRS = ("name", "topic")
_PARTITION_ARRAYS = ("partitions", "partition_data", "partition_indexes")
_PARTITION_ATTRS = ("index", "partition", "partition_index")
_TOPIC_ARRAYS = ("topics", "topic_data", "topic_names", "v3_and_below_topics")


def request_partitions(request: Any, topic_by_id: Callable[[Any], TopicMetadata | None] | None = None
                       ) -> list[tuple[str | None, int | None]]:
    """The (topic, partition) pairs a request names; partition None where it names a topic only.

    Walks the request's topic arrays (and AddPartitionsToTxn's transactions); topics given by id
    only (Fetch v13+) are named through `topic_by_id` (the broker's PartitionManager.topic_by_id)
    when it is given.
    """
    out: list[tuple[str | None, int | None]] = []
    topics: list = []
    for name in _TOPIC_ARRAYS:
        value = getattr(request, name, None)
        if isinstance(value, list):
            topics += value
    for txn in getattr(request, "transactions", None) or ():
        topics += getattr(txn, "topics", None) or []
    for topic in topics:
        if isinstance(topic, str):
            out.append((topic, None))
            continue
        name = next((getattr(topic, a) for a in _TOPIC_ATTRS if a in topic.__match_args__), None)
        if not name and topic_by_id is not None and "topic_id" in topic.__match_args__:
            name = _topic_name(topic_by_id, topic.topic_id)
        parts = next((getattr(topic, a) for a in _PARTITION_ARRAYS if a in topic.__match_args__), None)
        if not parts:
            out.append((name, None))
            continue
        for part in parts:
            if isinstance(part, int):
                out.append((name, part))
            else:
                out.append((name, next((getattr(part, a) for a in _PARTITION_ATTRS if a in part.__match_args__),
                                       None)))
    return out


def _topic_name(topic_by_id: Callable[[Any], TopicMetadata | None], topic_id: Any) -> str | None:
    try:
        meta = topic_by_id(topic_id)
    except Exception:
        return None
    return getattr(meta, "name", None) if meta is not None else None


# -- rules and records -----------------------------------------------------------------------------
@dataclass(slots=True)
class FaultRule:
    """One injected fault: which requests it matches and what happens to them.

    `count`: how many more matching requests it applies to (None: until removed or expired);
    `probability`: the fraction of matching requests it applies to (each one drawn at random).
    """

    id: int
    api_key: int
    error: int | None = None
    delay_ms: int | None = None
    drop: bool = False
    disconnect: bool = False
    count: int | None = 1
    probability: float | None = None
    topic: str | None = None
    partition: int | None = None
    client_id: str | None = None
    version: int | None = None
    expires_at: float | None = None     # time.monotonic() deadline
    hits: int = 0                       # requests it has applied to

    @property
    def api(self) -> str:
        return api_name_of(self.api_key)

    def expired(self, now: float) -> bool:
        return (self.expires_at is not None and now >= self.expires_at) or self.count == 0

    def to_json(self) -> dict[str, Any]:
        """The rule as the control endpoint reports it (error by name, remaining time in seconds)."""
        return {
            "id": self.id, "api": self.api, "api_key": self.api_key,
            "error": ErrorCode(self.error).name if self.error is not None else None,
            "delay_ms": self.delay_ms, "drop": self.drop, "disconnect": self.disconnect,
            "count": self.count, "probability": self.probability, "topic": self.topic,
            "partition": self.partition, "client_id": self.client_id, "version": self.version,
            "expires_in_s": (None if self.expires_at is None
                             else round(max(0.0, self.expires_at - time.monotonic()), 3)),
            "hits": self.hits,
        }


class FaultInjector:
    """The rules, latency and request recorder of one broker; used on the broker's event loop only.

    Other threads (KafkaBroker, ControlServer) call in through `call`, which runs a method on the
    loop and waits for its result.

    Built by the broker (Broker.enable_faults) with what it reads of it: the config (the control
    listener), the log manager (storage faults, log dir states), `topic_by_id` (rules on topics
    that requests name by id), its node id, `advertised` (host, port as advertised now) and
    `cluster_id` (the broker a Metadata error answer lists), and `serving` (whether a dropped
    request still waits). Without them (tests), rules match topics by name only, Metadata errors
    list no broker and storage faults are not available.
    """

    DROP = DROP     # what `intercept` returns for a request never answered

    def __init__(self, *, config: BrokerConfig | None = None, logs: LogManager | None = None,
                 topic_by_id: Callable[[Any], TopicMetadata | None] | None = None,
                 node_id: int = -1, advertised: Callable[[], tuple[str, int]] | None = None,
                 cluster_id: Callable[[], str | None] | None = None, serving: Callable[[], bool] | None = None,
                 max_recorded: int = DEFAULT_MAX_RECORDED, rng: random.Random | None = None):
        self._config = config
        self._logs = logs
        self._topic_by_id = topic_by_id
        self._node_id = node_id
        self._advertised = advertised
        self._cluster_id = cluster_id or (lambda: None)
        self._serving_now = serving
        self.rules: list[FaultRule] = []
        self.latency_ms = 0
        self.recording = True
        self.recorded: deque[RecordedRequest] = deque(maxlen=max_recorded)
        self._seq = 0
        self._next_id = 1
        self._random = rng or random.Random()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.control = None     # fault_control.ControlServer when the control endpoint is on

    def activate(self, control: str | None = None) -> None:
        """Serve the broker on the running loop (the control endpoint's calls land there), and start
        the control endpoint when `control` or the broker's `kafkapy.control.listener` is set."""
        try:
            self.loop = asyncio.get_running_loop()
        except RuntimeError:
            self.loop = None
        if control is None:
            try:
                control = self._config.get(CONTROL_LISTENER_CONFIG)
            except Exception:
                control = None
        if control and self.control is None:
            from .fault_control import ControlServer

            self.control = ControlServer(self, control)
            self.control.start()

    # -- rules ---------------------------------------------------------------------------------
    def add_rule(self, api: str | int, *, error: str | int | None = None, delay_ms: float | None = None,
                 drop: bool = False, disconnect: bool = False, count: int | None = 1,
                 probability: float | None = None, topic: str | None = None, partition: int | None = None,
                 client_id: str | None = None, version: int | None = None,
                 expires_in_s: float | None = None) -> FaultRule:
        """Add a rule (checked in the order added; the first that matches a request applies)."""
        key = api_key_of(api)
        code = error_code_of(error) if error is not None else None
        if drop and disconnect:
            raise ValueError("a rule either drops or disconnects, not both")
        if (drop or disconnect) and code is not None:
            raise ValueError("an error is an answer; it cannot go with drop or disconnect")
        if code is None and not drop and not disconnect and delay_ms is None:
            raise ValueError("a rule needs an action: error, delay_ms, drop or disconnect")
        if delay_ms is not None and delay_ms < 0:
            raise ValueError(f"delay_ms must be >= 0, not {delay_ms}")
        if count is not None and (isinstance(count, bool) or int(count) < 1):
            raise ValueError(f"count must be a positive number or None, not {count!r}")
        if probability is not None and not 0.0 <= float(probability) <= 1.0:
            raise ValueError(f"probability must be between 0 and 1, not {probability}")
        if expires_in_s is not None and expires_in_s <= 0:
            raise ValueError(f"expires_in_s must be > 0, not {expires_in_s}")
        rule = FaultRule(
            id=self._next_id, api_key=key, error=code, delay_ms=None if delay_ms is None else int(delay_ms),
            drop=bool(drop), disconnect=bool(disconnect), count=None if count is None else int(count),
            probability=None if probability is None else float(probability), topic=topic,
            partition=None if partition is None else int(partition), client_id=client_id,
            version=None if version is None else int(version),
            expires_at=None if expires_in_s is None else time.monotonic() + float(expires_in_s))
        self._next_id += 1
        self.rules.append(rule)
        log.info("fault injection: added rule %d: %s", rule.id, _describe(rule))
        return rule

    def remove_rule(self, rule_id: int) -> bool:
        """Remove a rule by id; False if there is none (it was removed, used up or expired)."""
        for i, rule in enumerate(self.rules):
            if rule.id == rule_id:
                del self.rules[i]
                log.info("fault injection: removed rule %d", rule_id)
                return True
        return False

    def clear_rules(self) -> int:
        """Remove every rule; returns how many there were."""
        n = len(self.rules)
        self.rules.clear()
        return n

    def list_rules(self) -> list[FaultRule]:
        """The active rules (expired and used-up ones are dropped first)."""
        self._expire(time.monotonic())
        return list(self.rules)

    def set_latency(self, ms: float) -> None:
        """Delay every response of this broker by `ms` (0: none)."""
        if ms < 0:
            raise ValueError(f"latency must be >= 0 ms, not {ms}")
        self.latency_ms = int(ms)
        log.info("fault injection: latency %d ms", self.latency_ms)

    def get_recorded(self, api: str | int | None = None) -> list[RecordedRequest]:
        """The recorded requests, oldest first; only those of `api` if given."""
        if api is None:
            return list(self.recorded)
        key = api_key_of(api)
        return [r for r in self.recorded if r.api_key == key]

    def clear_recorded(self) -> None:
        self.recorded.clear()

    def _expire(self, now: float) -> None:
        if any(rule.expired(now) for rule in self.rules):
            self.rules = [rule for rule in self.rules if not rule.expired(now)]

    # -- storage faults (log/storage_faults.py) ------------------------------------------------------
    def add_storage_fault(self, *, error: str = "ENOSPC", operation: str = "write", log_dir: str | None = None,
                          topic: str | None = None, partition: int | None = None) -> Any:
        """Make writes or fsyncs in a log dir, or of one partition, fail with ENOSPC or EIO."""
        fault = self._logs.storage_faults.inject(error=error, operation=operation, log_dir=log_dir,
                                                       topic=topic, partition=partition)
        log.info("fault injection: storage fault %d: %s on %s of %s", fault.id, fault.error, fault.operation,
                 fault.log_dir or f"{topic}" + (f"-{partition}" if partition is not None else ""))
        return fault

    def clear_storage_faults(self, fault_id: int | None = None) -> int:
        """Remove one storage fault (by id) or all; how many went. A full log dir comes back at
        its next space check (kafkapy.log.dir.space.check.interval.ms)."""
        removed = self._logs.storage_faults.clear(fault_id)
        log.info("fault injection: removed %d storage fault(s)", removed)
        return removed

    def list_storage_faults(self) -> list[Any]:
        return self._logs.storage_faults.list()

    def log_dir_states(self) -> list[dict[str, Any]]:
        """Each log dir's health: path, status (online, full, offline), reason, failures, recoveries."""
        return [{"path": str(path), "status": state.status, "reason": state.reason, "failures": state.failures,
                 "recoveries": state.recoveries} for path, state in self._logs.dir_states.items()]

    # -- the request path --------------------------------------------------------------------------
    def match(self, ctx: RequestContext, request: Any) -> FaultRule | None:
        """The first rule that applies to this request (counted as applied), or None."""
        if not self.rules:
            return None
        header = ctx.header
        now = time.monotonic()
        self._expire(now)
        partitions = None
        for rule in self.rules:
            if rule.api_key != header.api_key:
                continue
            if rule.version is not None and rule.version != header.api_version:
                continue
            if rule.client_id is not None and rule.client_id != header.client_id:
                continue
            if rule.topic is not None or rule.partition is not None:
                if partitions is None:
                    partitions = request_partitions(request, self._topic_by_id)
                if not any((rule.topic is None or rule.topic == t)
                           and (rule.partition is None or rule.partition == p) for t, p in partitions):
                    continue
            if rule.probability is not None and self._random.random() >= rule.probability:
                continue
            rule.hits += 1
            if rule.count is not None:
                rule.count -= 1
                if rule.count == 0:
                    self.rules.remove(rule)
            return rule
        return None

    async def intercept(self, ctx: RequestContext, request: Any) -> Any:
        """Record the request and apply latency and the first matching rule.

        Returns None (run the real handler), an error response to send instead, or DROP (send
        nothing); raises ConnectionClosed for a disconnect.
        """
        header = ctx.header
        if self.recording:
            self._seq += 1
            self.recorded.append(RecordedRequest(
                self._seq, time.time(), header.api_key, api_name_of(header.api_key), header.api_version,
                header.client_id, header.correlation_id, ctx.peer, request))
        rule = self.match(ctx, request)
        delay = self.latency_ms + ((rule.delay_ms or 0) if rule is not None else 0)
        if delay:
            await asyncio.sleep(delay / 1000)
        if rule is None:
            return None
        if rule.disconnect:
            from ..protocol.errors import ConnectionClosed

            raise ConnectionClosed(f"fault injection: rule {rule.id} closes the connection "
                                   f"({api_name_of(header.api_key)} from {header.client_id!r})")
        if rule.drop:
            log.debug("fault injection: rule %d drops %s from %s", rule.id, api_name_of(header.api_key), ctx.peer)
            connection = ctx.connection
            # the connection answers in order, so it hangs here until the client closes it (or the
            # broker stops: its shutdown waits for busy connections)
            while connection is not None and not getattr(connection, "_closed", True) and self._serving():
                await asyncio.sleep(0.05)
            return DROP
        if rule.error is not None:
            return error_response(request, header.api_version, rule.error, broker=self._this_broker())
        return None

    def _this_broker(self) -> AdvertisedNode | None:
        if self._advertised is None:
            return None
        host, port = self._advertised()
        return _ThisBroker(self._node_id, host, port, self._cluster_id)

    def _serving(self) -> bool:
        return self._serving_now is None or self._serving_now()

    # -- from other threads -----------------------------------------------------------------------
    def call(self, fn: Callable[..., Any], *args: Any, timeout: float = 10.0, **kwargs: Any) -> Any:
        """Run `fn(*args, **kwargs)` on the broker's loop (or here when there is none) and return its result."""
        loop = self.loop
        if loop is None or loop.is_closed():
            return fn(*args, **kwargs)
        try:
            if asyncio.get_running_loop() is loop:
                return fn(*args, **kwargs)
        except RuntimeError:
            pass
        future: concurrent.futures.Future = concurrent.futures.Future()

        def run() -> None:
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as exc:
                future.set_exception(exc)

        loop.call_soon_threadsafe(run)
        return future.result(timeout)


def _describe(rule: FaultRule) -> str:
    what = []
    if rule.error is not None:
        what.append(f"error {ErrorCode(rule.error).name}")
    if rule.delay_ms is not None:
        what.append(f"delay {rule.delay_ms} ms")
    if rule.drop:
        what.append("drop")
    if rule.disconnect:
        what.append("disconnect")
    match = [rule.api] + [f"{name}={value!r}" for name, value in (
        ("version", rule.version), ("topic", rule.topic), ("partition", rule.partition),
        ("client_id", rule.client_id)) if value is not None]
    how = f"count={rule.count}" + (f" probability={rule.probability}" if rule.probability is not None else "")
    return f"{' '.join(match)}: {', '.join(what)} ({how})"


def install(broker: Any, *, control: str | None = None) -> FaultInjector:
    """Turn fault injection on for `broker` (call on its loop) and start the control endpoint when
    `control` or the broker's `kafkapy.control.listener` names a loopback host:port. The broker
    holds the injector (Broker.enable_faults); the launchers call this."""
    return broker.enable_faults(control)
