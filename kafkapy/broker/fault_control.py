"""The control endpoint of fault injection: HTTP+JSON on a loopback port, for tests in other languages.

Enabled by `kafkapy.control.listener=127.0.0.1:0` (or `kafkapy serve --ephemeral --control`); the
API is documented in docs/testing.md. Kept apart from faults.py so that the request path never
imports http.server.
"""
from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Protocol
from urllib.parse import parse_qs, urlsplit

__all__ = ["ControlServer", "parse_control_address"]

log = logging.getLogger(__name__)


# faults.CONTROL_LISTENER_CONFIG (faults.py imports this module when the endpoint starts, not the
# other way round: no import cycle)
CONTROL_LISTENER_CONFIG = "kafkapy.control.listener"


class FaultInjector(Protocol):
    """What the endpoint calls of the injector (faults.FaultInjector); `call` runs one of its
    methods on the broker's loop."""

    loop: Any
    latency_ms: int
    list_rules: Callable[..., Any]
    add_rule: Callable[..., Any]
    clear_rules: Callable[..., Any]
    remove_rule: Callable[..., Any]
    set_latency: Callable[..., Any]
    get_recorded: Callable[..., Any]
    clear_recorded: Callable[..., Any]
    list_storage_faults: Callable[..., Any]
    add_storage_fault: Callable[..., Any]
    clear_storage_faults: Callable[..., Any]
    log_dir_states: Callable[..., Any]

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any: ...


def parse_control_address(text: str) -> tuple[str, int]:
    """host:port of the control endpoint; the host must be loopback (it is unauthenticated)."""
    text = text.strip()
    if "://" in text:
        text = text.split("://", 1)[1]
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"{CONTROL_LISTENER_CONFIG} must be host:port, not {text!r}")
    host = host.strip("[]") or "127.0.0.1"
    if host not in ("127.0.0.1", "localhost", "::1"):
        raise ValueError(f"{CONTROL_LISTENER_CONFIG} must be on a loopback address (127.0.0.1), not {host!r}")
    return host, int(port)


class ControlServer:
    """HTTP+JSON control of a FaultInjector for tests in other languages, on a loopback port.

    GET /rules, POST /rules, DELETE /rules/<id>, DELETE /rules; GET/PUT /latency;
    GET /recorded[?api=Name], DELETE /recorded; GET/POST/DELETE /storage-faults, DELETE
    /storage-faults/<id>, GET /log-dirs (see docs/testing.md). Requests are served on a
    thread; every operation runs on the broker's event loop (FaultInjector.call).
    """

    def __init__(self, injector: FaultInjector, address: str):
        self.injector = injector
        host, port = parse_control_address(address)
        self._server = _HTTPServer((host, port), _ControlHandler)
        self._server.injector = injector  # type: ignore[attr-defined]
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{'[' + host + ']' if ':' in host else host}:{port}"

    def start(self) -> None:
        self._thread = threading.Thread(target=self._serve, name=f"kafkapy-control-{self.url}", daemon=True)
        self._thread.start()
        log.info("fault injection control endpoint on %s", self.url)

    def _serve(self) -> None:
        # ends by itself once the broker's loop is gone (an in-process broker has no stop hook here)
        loop = self.injector.loop
        try:
            while not self._server.stopping:  # type: ignore[attr-defined]
                if loop is not None and loop.is_closed():
                    break
                self._server.handle_request()
        finally:
            self._server.server_close()

    def close(self) -> None:
        self._server.stopping = True  # type: ignore[attr-defined]


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    timeout = 0.25           # handle_request returns this often, to notice the end
    stopping = False

    def server_bind(self) -> None:
        import socket

        if ":" in self.server_address[0]:
            self.address_family = socket.AF_INET6
            self.socket = socket.socket(self.address_family, self.socket_type)
        super().server_bind()


class _ControlHandler(BaseHTTPRequestHandler):
    server_version = "kafkapy-control"
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # one log line per request is too many
        log.debug("control: " + format, *args)

    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")

    def do_PUT(self) -> None:
        self._route("PUT")

    def do_DELETE(self) -> None:
        self._route("DELETE")

    def _route(self, method: str) -> None:
        injector: FaultInjector = self.server.injector  # type: ignore[attr-defined]
        url = urlsplit(self.path)
        parts = [p for p in url.path.split("/") if p]
        query = parse_qs(url.query)
        try:
            body = self._body()
            if parts == ["rules"] and method == "GET":
                rules = injector.call(injector.list_rules)
                return self._send(200, {"rules": [rule.to_json() for rule in rules]})
            if parts == ["rules"] and method == "POST":
                spec = _rule_spec(body)
                rule = injector.call(lambda: injector.add_rule(**spec))
                return self._send(201, {"rule": rule.to_json()})
            if parts == ["rules"] and method == "DELETE":
                return self._send(200, {"removed": injector.call(injector.clear_rules)})
            if len(parts) == 2 and parts[0] == "rules" and method == "DELETE":
                if not parts[1].isdigit():
                    return self._send(400, {"error": f"not a rule id: {parts[1]!r}"})
                if injector.call(injector.remove_rule, int(parts[1])):
                    return self._send(200, {"removed": 1})
                return self._send(404, {"error": f"no rule {parts[1]}"})
            if parts == ["latency"] and method == "GET":
                return self._send(200, {"ms": injector.latency_ms})
            if parts == ["latency"] and method in ("PUT", "POST"):
                if not isinstance(body, dict) or not isinstance(body.get("ms"), (int, float)):
                    return self._send(400, {"error": 'expected {"ms": <number>}'})
                injector.call(injector.set_latency, body["ms"])
                return self._send(200, {"ms": injector.latency_ms})
            if parts == ["recorded"] and method == "GET":
                api = query.get("api", [None])[0]
                records = injector.call(injector.get_recorded, api)
                return self._send(200, {"bytes": "base64", "requests": [r.to_json() for r in records]})
            if parts == ["recorded"] and method == "DELETE":
                injector.call(injector.clear_recorded)
                return self._send(200, {"cleared": True})
            if parts == ["storage-faults"] and method == "GET":
                faults = injector.call(injector.list_storage_faults)
                return self._send(200, {"faults": [f.to_json() for f in faults]})
            if parts == ["storage-faults"] and method == "POST":
                spec = _storage_fault_spec(body)
                fault = injector.call(lambda: injector.add_storage_fault(**spec))
                return self._send(201, {"fault": fault.to_json()})
            if parts == ["storage-faults"] and method == "DELETE":
                return self._send(200, {"removed": injector.call(injector.clear_storage_faults)})
            if len(parts) == 2 and parts[0] == "storage-faults" and method == "DELETE":
                if not parts[1].isdigit():
                    return self._send(400, {"error": f"not a storage fault id: {parts[1]!r}"})
                if injector.call(injector.clear_storage_faults, int(parts[1])):
                    return self._send(200, {"removed": 1})
                return self._send(404, {"error": f"no storage fault {parts[1]}"})
            if parts == ["log-dirs"] and method == "GET":
                return self._send(200, {"log_dirs": injector.call(injector.log_dir_states)})
            if parts in (["rules"], ["latency"], ["recorded"], ["storage-faults"], ["log-dirs"]):
                return self._send(405, {"error": f"{method} not allowed on /{parts[0]}"})
            return self._send(404, {"error": f"no such endpoint: {url.path}"})
        except (ValueError, TypeError) as exc:
            return self._send(400, {"error": str(exc)})
        except Exception as exc:  # reported to the caller; the endpoint keeps serving
            log.warning("control: %s %s failed: %s", method, self.path, exc)
            return self._send(500, {"error": f"{type(exc).__name__}: {exc}"})

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        if not length:
            return None
        raw = self.rfile.read(length)
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise ValueError(f"the body is not JSON: {exc}") from None

    def _send(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


_RULE_FIELDS = frozenset({"api", "error", "delay_ms", "drop", "disconnect", "count", "probability", "topic",
                          "partition", "client_id", "version", "expires_in_s"})


def _rule_spec(body: Any) -> dict[str, Any]:
    """A POST /rules body as add_rule's arguments ("count" absent: 1, or unlimited with "probability")."""
    if not isinstance(body, dict) or "api" not in body:
        raise ValueError('expected a JSON object with at least "api", e.g. {"api": "Produce", "error": '
                         '"NOT_LEADER_OR_FOLLOWER"}')
    unknown = set(body) - _RULE_FIELDS
    if unknown:
        raise ValueError(f"unknown rule field(s): {', '.join(sorted(unknown))}")
    spec = dict(body)
    if "count" not in spec and spec.get("probability") is not None:
        spec["count"] = None
    return spec


_STORAGE_FAULT_FIELDS = frozenset({"error", "operation", "log_dir", "topic", "partition"})


def _storage_fault_spec(body: Any) -> dict[str, Any]:
    """A POST /storage-faults body as add_storage_fault's arguments."""
    if not isinstance(body, dict):
        raise ValueError('expected a JSON object, e.g. {"log_dir": "/data/a", "error": "ENOSPC", '
                         '"operation": "write"}')
    unknown = set(body) - _STORAGE_FAULT_FIELDS
    if unknown:
        raise ValueError(f"unknown storage fault field(s): {', '.join(sorted(unknown))}")
    return dict(body)
