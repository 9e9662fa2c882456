"""Fault injection and request recording on KafkaBroker: `inject`, `rules`, `recorded`, `set_latency`,
and storage faults: `inject_storage_fault`, `storage_faults`, `clear_storage_faults`, `log_dirs`.

The same calls work in both isolations: in-process they run on the broker's event loop
(FaultInjector.call); with isolation="process" they go to the child's control endpoint
(`kafkapy serve --ephemeral --control`, broker/fault_control.py) over HTTP+JSON.
"""
from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from ..broker.faults import FaultInjector, RecordedRequest, api_key_of

__all__ = ["BrokerFaults", "FaultRuleHandle", "RecordedRequest"]

CONTROL_PREFIX = "KAFKAPY_CONTROL="
_UNSET: Any = object()
_HTTP_TIMEOUT_S = 10.0


@dataclass(slots=True)
class FaultRuleHandle:
    """An injected rule as a test sees it (a snapshot: `hits` and `count` are those of when it was read).

    `remove()` takes it off the broker; True if it was still there (not used up or expired).
    """

    id: int
    api: str
    api_key: int
    error: str | None
    delay_ms: int | None
    drop: bool
    disconnect: bool
    count: int | None
    probability: float | None
    topic: str | None
    partition: int | None
    client_id: str | None
    version: int | None
    expires_in_s: float | None
    hits: int
    _owner: Any = field(default=None, repr=False, compare=False)

    @classmethod
    def from_json(cls, data: dict[str, Any], owner: Any) -> FaultRuleHandle:
        return cls(**{name: data.get(name) for name in cls.__slots__ if not name.startswith("_")}, _owner=owner)

    def remove(self) -> bool:
        return self._owner._remove_rule(self.id)


class BrokerFaults:
    """The fault-injection face of KafkaBroker (a mixin: it uses the broker's isolation and state)."""

    _faults: FaultInjector | None = None
    _control_url: str | None = None

    # -- what tests use ----------------------------------------------------------------------
    def inject(self, api: str | int, *, error: str | int | None = None, delay_ms: float | None = None,
               drop: bool = False, disconnect: bool = False, count: int | None = _UNSET,
               probability: float | None = None, topic: str | None = None, partition: int | None = None,
               client_id: str | None = None, version: int | None = None,
               expires_in_s: float | None = None) -> FaultRuleHandle:
        """Make requests of `api` (a name like "Produce", or a key) fail, wait, go unanswered or disconnect.

        `error`: answer this Kafka error (name or code) instead of running the request;
        `delay_ms`: answer that much later; `drop`: never answer (the connection hangs until the
        client closes it); `disconnect`: close the connection. Matching: `version`, `topic`,
        `partition`, `client_id` (None: any). `count`: the next N matching requests (default 1;
        None: until removed); `probability`: a fraction of matching requests instead (then `count`
        defaults to None: every time the draw says so); `expires_in_s`: the rule goes after that.
        """
        if count is _UNSET:
            count = None if probability is not None else 1
        spec = {"api": api, "error": error, "delay_ms": delay_ms, "drop": drop, "disconnect": disconnect,
                "count": count, "probability": probability, "topic": topic, "partition": partition,
                "client_id": client_id, "version": version, "expires_in_s": expires_in_s}
        if self._uses_control():
            return FaultRuleHandle.from_json(self._control("POST", "/rules", spec)["rule"], self)
        injector = self._injector()
        rule = injector.call(lambda: injector.add_rule(**spec).to_json())
        return FaultRuleHandle.from_json(rule, self)

    def rules(self) -> list[FaultRuleHandle]:
        """The active rules, in the order they are checked."""
        if self._uses_control():
            return [FaultRuleHandle.from_json(r, self) for r in self._control("GET", "/rules")["rules"]]
        injector = self._injector()
        rules = injector.call(lambda: [rule.to_json() for rule in injector.list_rules()])
        return [FaultRuleHandle.from_json(r, self) for r in rules]

    def clear_rules(self) -> int:
        """Remove every rule; returns how many there were."""
        if self._uses_control():
            return self._control("DELETE", "/rules")["removed"]
        injector = self._injector()
        return injector.call(injector.clear_rules)

    def recorded(self, api: str | int | None = None) -> list[RecordedRequest]:
        """Every request the broker received since start (or clear_recorded), oldest first; only
        those of `api` if given. `body` is the decoded request message in-process; with
        isolation="process" it is the control endpoint's JSON form (a dict, bytes as base64)."""
        if self._uses_control():
            query = f"?api={api_key_of(api)}" if api is not None else ""
            return [RecordedRequest(r["seq"], r["time"], r["api_key"], r["api"], r["version"], r["client_id"],
                                    r["correlation_id"], r["peer"], r["body"])
                    for r in self._control("GET", "/recorded" + query)["requests"]]
        injector = self._injector()
        return injector.call(injector.get_recorded, api)

    def clear_recorded(self) -> None:
        """Forget the requests recorded so far."""
        if self._uses_control():
            self._control("DELETE", "/recorded")
            return
        injector = self._injector()
        injector.call(injector.clear_recorded)

    def set_latency(self, ms: float) -> None:
        """Answer every request of this broker `ms` later (0: no added latency)."""
        if self._uses_control():
            self._control("PUT", "/latency", {"ms": ms})
            return
        injector = self._injector()
        injector.call(injector.set_latency, ms)

    # -- storage faults ----------------------------------------------------------------------------
    def inject_storage_fault(self, *, log_dir: str | os.PathLike | None = None, topic: str | None = None,
                             partition: int | None = None, error: str = "ENOSPC",
                             operation: str = "write") -> dict[str, Any]:
        """Make writes (`operation="write"`), fsyncs ("fsync") or both ("any") in `log_dir` (one of
        the broker's log.dirs), or of one partition (`topic`, `partition`), fail with `error`:
        "ENOSPC" (the dir fills up: its partitions refuse writes, reads go on, and the dir comes
        back once the fault is cleared) or "EIO" (the dir goes offline until the broker restarts).
        Returns the fault as a dict (its "id" for `clear_storage_faults`)."""
        spec = {"error": error, "operation": operation, "topic": topic, "partition": partition,
                "log_dir": None if log_dir is None else os.fspath(log_dir)}
        if self._uses_control():
            return self._control("POST", "/storage-faults", spec)["fault"]
        injector = self._injector()
        return injector.call(lambda: injector.add_storage_fault(**spec).to_json())

    def storage_faults(self) -> list[dict[str, Any]]:
        """The active storage faults (with how often each struck: "hits")."""
        if self._uses_control():
            return self._control("GET", "/storage-faults")["faults"]
        injector = self._injector()
        return injector.call(lambda: [f.to_json() for f in injector.list_storage_faults()])

    def clear_storage_faults(self, fault_id: int | None = None) -> int:
        """Remove one storage fault (by id) or all of them; how many went."""
        if self._uses_control():
            if fault_id is None:
                return self._control("DELETE", "/storage-faults")["removed"]
            try:
                return self._control("DELETE", f"/storage-faults/{fault_id}")["removed"]
            except LookupError:
                return 0
        injector = self._injector()
        return injector.call(injector.clear_storage_faults, fault_id)

    def log_dirs(self) -> list[dict[str, Any]]:
        """Each log dir's health: {"path", "status": "online" | "full" | "offline", "reason",
        "failures", "recoveries"}."""
        if self._uses_control():
            return self._control("GET", "/log-dirs")["log_dirs"]
        injector = self._injector()
        return injector.call(injector.log_dir_states)

    @property
    def control_url(self) -> str | None:
        """The control endpoint's base URL (isolation="process", or kafkapy.control.listener set), else None."""
        if self._control_url is not None:
            return self._control_url
        control = getattr(self._faults, "control", None)
        return control.url if control is not None else None

    # -- plumbing -------------------------------------------------------------------------------
    def _remove_rule(self, rule_id: int) -> bool:
        if self._uses_control():
            try:
                self._control("DELETE", f"/rules/{rule_id}")
            except LookupError:
                return False
            return True
        injector = self._injector()
        return injector.call(injector.remove_rule, rule_id)

    def _install_faults(self, broker: Any) -> None:
        """Attach a fresh injector to an in-process broker (called on its loop before it starts)."""
        from ..broker.faults import install

        self._faults = install(broker)

    def _uses_control(self) -> bool:
        return getattr(self, "isolation", "thread") == "process"

    def _injector(self) -> FaultInjector:
        if self._faults is None or not getattr(self, "running", True):
            raise RuntimeError("the broker is not running")
        return self._faults

    def _control(self, method: str, path: str, payload: Any = None) -> Any:
        if self._control_url is None:
            raise RuntimeError("the broker is not running (no control endpoint)")
        data = None if payload is None else json.dumps(payload).encode()
        request = urllib.request.Request(self._control_url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=_HTTP_TIMEOUT_S) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            try:
                message = json.loads(exc.read()).get("error", exc.reason)
            except ValueError:
                message = exc.reason
            if exc.code == 404:
                raise LookupError(message) from None
            if exc.code == 400:
                raise ValueError(message) from None
            raise RuntimeError(f"control endpoint: {exc.code} {message}") from None
