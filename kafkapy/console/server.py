"""The console's HTTP server: aiohttp on the broker's event loop, Jinja2 templates, routes.

Read-only unless `kafkapy.console.writes.enable=true`; the one write is a consumer group's
offset reset (committed as an admin client's OffsetCommit would be, only for an Empty group).
Errors answer with a one-line message and the HTTP status (HTML, or JSON under /api/); an
unexpected exception is logged once and answered 500 without a traceback.
"""
from __future__ import annotations

import json
import logging
import time
from datetime import datetime, timezone
from importlib import resources
from typing import TYPE_CHECKING
from urllib.parse import urlencode, urlsplit

import jinja2
from aiohttp import web

from ..groupcoord.group import GroupState, OffsetAndMetadata
from . import messages as msgs
from . import state
from .charts import human, line_chart
from .history import SAMPLE_INTERVAL_S, History
from .state import ConsoleError

if TYPE_CHECKING:
    from .source import ConsoleSource

__all__ = ["ConsoleServer", "parse_listener"]

log = logging.getLogger(__name__)

TOPICS_PAGE_SIZE = 100
PARTITIONS_PAGE_SIZE = 500
STATIC_FILES = {"console.css": "text/css", "console.js": "application/javascript"}
RESET_STRATEGIES = ("earliest", "latest", "offset", "timestamp", "shift")


def parse_listener(text: str) -> tuple[str, int]:
    """(host, port) of kafkapy.console.listener, http://host:port (validated with the config)."""
    from ..metrics.http_endpoint import parse_listener_url

    return parse_listener_url(text)


class ConsoleServer:
    """The web console of one broker."""

    def __init__(self, broker: ConsoleSource, listener: str, writes_enabled: bool = False):
        self.broker = broker
        self.host, self.port = parse_listener(listener)
        self.writes_enabled = writes_enabled
        self.history = History(broker)
        self.templates = jinja2.Environment(
            loader=jinja2.PackageLoader("kafkapy.console", "templates"), autoescape=True,
            trim_blocks=True, lstrip_blocks=True)
        self.templates.filters.update(human=human, size=_size, ts=_timestamp, jsonattr=json.dumps)
        self._static = {name: resources.files("kafkapy.console").joinpath("static", name).read_bytes()
                        for name in STATIC_FILES}
        self._runner: web.AppRunner | None = None
        self._sampler = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    # -- lifecycle ------------------------------------------------------------------------
    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._errors], client_max_size=64 * 1024)
        app.add_routes([
            web.get("/", self.overview),
            web.get("/topics", self.topics),
            web.get("/topics/{topic}", self.topic),
            web.get("/topics/{topic}/messages", self.messages),
            web.get("/topics/{topic}/messages/export", self.export),
            web.get("/api/topics/{topic}/messages", self.messages_api),
            web.get("/groups", self.groups),
            web.get("/groups/{group}", self.group),
            web.post("/groups/{group}/reset", self.reset),
            web.get("/requests", self.requests),
            web.get("/schemas", self.schemas),
            web.get("/schemas/{subject}", self.subject),
            web.get("/clients", self.clients),
            web.get("/static/{name}", self.static),
        ])
        return app

    async def start(self) -> None:
        import asyncio

        self._runner = web.AppRunner(self.app(), access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True)
        await site.start()
        server = getattr(site, "_server", None)
        if server is not None and server.sockets:
            self.port = server.sockets[0].getsockname()[1]
        self.history.sample()
        self._sampler = asyncio.get_running_loop().create_task(self._sample_forever())
        log.info("web console on %s (%s)", self.url,
                 "writes enabled" if self.writes_enabled else "read-only")

    async def stop(self) -> None:
        if self._sampler is not None:
            self._sampler.cancel()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _sample_forever(self) -> None:
        import asyncio

        while True:
            await asyncio.sleep(SAMPLE_INTERVAL_S)
            try:
                self.history.sample()
            except Exception:
                log.exception("console: sampling the broker's history failed")

    # -- plumbing -------------------------------------------------------------------------
    @web.middleware
    async def _errors(self, request: web.Request, handler):
        started = time.perf_counter()
        try:
            response = await handler(request)
        except ConsoleError as exc:
            link = exc.link + request.path_qs if exc.link else None
            response = self._error(request, exc.status, exc.message, link)
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            message = {404: f"no page at {request.path}", 405: f"{request.method} is not allowed on {request.path}"
                       }.get(exc.status, exc.reason)
            response = self._error(request, exc.status, message)
        except Exception:
            log.exception("console: %s %s failed", request.method, request.path_qs)
            response = self._error(request, 500, "internal error in the console (logged by the broker)")
        response.headers["Server-Timing"] = f"render;dur={(time.perf_counter() - started) * 1000:.1f}"
        return response

    def _error(self, request: web.Request, status: int, message: str, link: str | None = None) -> web.Response:
        if request.path.startswith("/api/"):
            return web.json_response({"error": message} | ({"link": link} if link else {}), status=status)
        return self._page("error.html", http_status=status, title=f"Error {status}", status=status,
                          message=message, link=link)

    def _page(self, template: str, http_status: int = 200, **context) -> web.Response:
        html = self.templates.get_template(template).render(
            node_id=self.broker.node_id, cluster_id=self.broker.cluster_id,
            writes_enabled=self.writes_enabled,
            schemas_enabled=self.broker.schema_registry is not None, **context)
        return web.Response(text=html, status=http_status, content_type="text/html")

    async def static(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in self._static:
            raise ConsoleError(404, f"no static file {name!r}")
        return web.Response(body=self._static[name], content_type=STATIC_FILES[name],
                            headers={"Cache-Control": "max-age=3600"})

    # -- pages ----------------------------------------------------------------------------
    async def overview(self, request: web.Request) -> web.Response:
        history = self.history
        apis = history.busiest_apis()
        window = history.window_s
        charts = [
            line_chart("Messages in per second", {"messages in/s": list(history.throughput["messages_in"])},
                       window_s=window),
            line_chart("Bytes per second", {"bytes in/s": list(history.throughput["bytes_in"]),
                                            "bytes out/s": list(history.throughput["bytes_out"])}, unit="B",
                       window_s=window),
            line_chart("Requests per second", {"requests/s": list(history.throughput["requests"])},
                       window_s=window),
            line_chart("Request latency p99", {api: list(history.request_p99.get(api, ())) for api in apis},
                       unit="ms", window_s=window),
        ]
        span = f"{window / 3600:g} hour" if window >= 3600 else f"{window:g} seconds"
        return self._page("overview.html", title="Overview", nav="overview", span=span,
                          overview=state.cluster_overview(self.broker), charts=charts,
                          metrics=history.totals() is not None)

    async def topics(self, request: web.Request) -> web.Response:
        query = request.query.get("q", "")
        internal = request.query.get("internal", "1") != "0"
        rows = state.topic_summaries(self.broker, query, internal)
        rates = self.history.topic_rates
        for row in rows:
            row["in_rate"] = rates.get(row["name"])
        page = _int_param(request, "page", 1, minimum=1)
        pages = max(1, -(-len(rows) // TOPICS_PAGE_SIZE))
        shown = rows[(page - 1) * TOPICS_PAGE_SIZE: page * TOPICS_PAGE_SIZE]
        return self._page("topics.html", title="Topics", nav="topics", rows=shown, total=len(rows),
                          query=query, page=page, pages=pages, internal=internal,
                          page_url=lambda p: "/topics?" + urlencode({"q": query, "page": p}))

    async def topic(self, request: web.Request) -> web.Response:
        detail = state.topic_detail(self.broker, request.match_info["topic"])
        page = _int_param(request, "page", 1, minimum=1)
        partitions = detail["partitions"]
        pages = max(1, -(-len(partitions) // PARTITIONS_PAGE_SIZE))
        shown = partitions[(page - 1) * PARTITIONS_PAGE_SIZE: page * PARTITIONS_PAGE_SIZE]
        totals = {"size": sum(p["size"] or 0 for p in partitions),
                  "messages": sum(max((p["log_end"] or 0) - (p["log_start"] or 0), 0) for p in partitions),
                  "under_replicated": sum(p["under_replicated"] for p in partitions)}
        return self._page("topic.html", title=f"Topic {detail['name']}", nav="topics", topic=detail,
                          partitions=shown, page=page, pages=pages, totals=totals)

    async def _browse(self, request: web.Request):
        topic = request.match_info["topic"]
        partition = _int_param(request, "partition", 0, minimum=0)
        log_ = msgs.partition_log(self.broker, topic, partition)
        query = request.query
        timestamp = _timestamp_param(query.get("timestamp", ""))
        offset = _int_param(request, "offset", None)
        limit = _int_param(request, "limit", 50, minimum=1, maximum=msgs.MAX_LIMIT)
        where = query.get("from", "earliest")
        if where not in ("earliest", "latest", "last"):
            raise ConsoleError(400, f"from must be earliest, latest or last, not {where!r}")
        # latest: only what arrives from now on (live tail); last: the last `limit` records
        from_end = None if offset is not None or timestamp is not None else \
            {"earliest": None, "latest": 0, "last": limit}[where]
        search = query.get("q", "")
        start = msgs.start_offset(log_, offset, timestamp, from_end)
        return topic, partition, await msgs.read_page_async(log_, start, limit, search)

    async def messages(self, request: web.Request) -> web.Response:
        topic = request.match_info["topic"]
        meta = self.broker.partitions.topic(topic)
        if meta is None:
            raise ConsoleError(404, f"unknown topic {topic!r} (UNKNOWN_TOPIC_OR_PARTITION)")
        fmt = msgs.parse_format(request.query.get("format"))
        _, partition, page = await self._browse(request)
        rows = [_record_row(r, fmt) for r in page.records]
        params = {k: v for k, v in request.query.items() if k not in ("offset", "timestamp", "from")}
        return self._page("messages.html", title=f"Messages of {topic}", nav="topics", topic=topic,
                          partitions=meta.partition_count, partition=partition, page=page, rows=rows,
                          fmt=fmt, formats=msgs.FORMATS, query=request.query,
                          next_url=f"/topics/{topic}/messages?" + urlencode(params | {"offset": page.next_offset}),
                          export_url=f"/topics/{topic}/messages/export?" + request.query_string,
                          tail_url=f"/api/topics/{topic}/messages?" + urlencode(
                              {"partition": partition, "format": fmt, "q": request.query.get("q", "")}))

    async def messages_api(self, request: web.Request) -> web.Response:
        fmt = msgs.parse_format(request.query.get("format"))
        topic, partition, page = await self._browse(request)
        return web.json_response({
            "topic": topic, "partition": partition, "start": page.start, "next_offset": page.next_offset,
            "log_start": page.log_start, "log_end": page.log_end, "scanned": page.scanned,
            "records": [_record_row(r, fmt) for r in page.records]})

    async def export(self, request: web.Request) -> web.Response:
        topic, partition, page = await self._browse(request)
        body = json.dumps([msgs.export_record(topic, partition, r) for r in page.records], indent=1,
                          ensure_ascii=False)
        name = f"{topic}-{partition}-{page.start}.json"
        return web.Response(text=body, content_type="application/json",
                            headers={"Content-Disposition": f'attachment; filename="{name}"'})

    # -- the schema registry's subjects (kafkapy/schemaregistry, read through the broker) ------------
    def _registry(self):
        service = self.broker.schema_registry
        if service is None:
            raise ConsoleError(404, "the schema registry is off (kafkapy.schema.registry.listener)")
        return service.registry

    async def schemas(self, request: web.Request) -> web.Response:
        registry = self._registry()
        query = request.query.get("q", "")
        rows = []
        for subject in registry.subject_list(deleted=True):
            if query.lower() not in subject.lower():
                continue
            versions = registry.live_versions(subject, deleted=True)
            live = [v for v in versions if not v.deleted]
            latest = (live or versions)[-1]
            content = registry.schemas[latest.id]
            rows.append({"subject": subject, "versions": len(live), "deleted": len(versions) - len(live),
                         "latest": latest.version, "id": latest.id, "type": content.schema_type,
                         "compatibility": registry.compatibility_of(subject)})
        return self._page("schemas.html", title="Schemas", nav="schemas", rows=rows, query=query,
                          global_compatibility=registry.compatibility_of(None), mode=registry.mode_of(None))

    async def subject(self, request: web.Request) -> web.Response:
        import difflib

        registry = self._registry()
        subject = request.match_info["subject"]
        versions = registry.live_versions(subject, deleted=True)
        if not versions:
            raise ConsoleError(404, f"no subject {subject!r} in the schema registry")
        numbers = [v.version for v in versions]
        new = _int_param(request, "to", numbers[-1])
        old = _int_param(request, "from", numbers[-2] if len(numbers) > 1 else numbers[-1])
        if new not in numbers or old not in numbers:
            raise ConsoleError(404, f"subject {subject!r} has versions {numbers}")
        by_number = {v.version: v for v in versions}

        def pretty(version) -> list[str]:
            text = registry.schemas[by_number[version].id].text
            try:
                text = json.dumps(json.loads(text), indent=2)
            except ValueError:
                pass
            return text.splitlines()

        diff = list(difflib.unified_diff(pretty(old), pretty(new), f"version {old}", f"version {new}", lineterm=""))
        rows = [{"version": v.version, "id": v.id, "type": registry.schemas[v.id].schema_type, "deleted": v.deleted,
                 "references": registry.schemas[v.id].references} for v in versions]
        return self._page("subject.html", title=f"Subject {subject}", nav="schemas", subject=subject, rows=rows,
                          old=old, new=new, diff=diff, schema="\n".join(pretty(new)),
                          compatibility=registry.compatibility_of(subject))

    async def groups(self, request: web.Request) -> web.Response:
        query = request.query.get("q", "")
        return self._page("groups.html", title="Consumer groups", nav="groups",
                          rows=state.group_summaries(self.broker, query), query=query,
                          share_rows=state.share_group_summaries(self.broker, query),
                          coordinator=self.broker.group_coordinator.active)

    async def group(self, request: web.Request, preview: dict | None = None, status: int = 200) -> web.Response:
        detail = state.group_detail(self.broker, request.match_info["group"])
        lag = {detail["group"]: list(self.history.group_lag.get(detail["group"], ()))}
        return self._page("group.html", http_status=status, title=f"Group {detail['group']}", nav="groups",
                          group=detail, lag_chart=line_chart("Lag (sum over partitions)", lag,
                                                             window_s=self.history.window_s),
                          preview=preview, strategies=RESET_STRATEGIES, done=request.query.get("reset"))

    async def reset(self, request: web.Request) -> web.Response:
        group_id = request.match_info["group"]
        self._check_origin(request)
        form = await request.post()
        group = state.get_group(self.broker, group_id)
        plan = self._reset_plan(group, form)
        execute = form.get("execute") == "1"
        if not execute:
            return await self.group(request, preview=plan)
        if not self.writes_enabled:
            raise ConsoleError(403, "the console is read-only: set kafkapy.console.writes.enable=true on the "
                                    "broker to reset offsets (the dry run works without it)")
        if not group.is_in(GroupState.EMPTY):
            raise ConsoleError(409, f"group {group_id!r} is {group.state.value}: offsets can only be reset while "
                                    "the group is inactive (Empty), as in Kafka; stop its consumers first")
        now = int(time.time() * 1000)
        offsets = {(row["topic"], row["partition"]): OffsetAndMetadata(row["new"], commit_timestamp=now)
                   for row in plan["rows"]}
        results = self.broker.group_coordinator.commit_offsets(group_id, "", None, -1, offsets)
        failed = {tp: code for tp, code in results.items() if code}
        if failed:
            from ..protocol.errors import ErrorCode

            tp, code = next(iter(failed.items()))
            raise ConsoleError(409, f"the offset commit failed for {len(failed)} partitions, "
                                    f"e.g. {tp[0]}-{tp[1]}: {ErrorCode(code).name}")
        coordinator = self.broker.group_coordinator
        await self.broker.replicas.wait_appended("__consumer_offsets", coordinator.partition_for(group_id),
                                                 self.broker.config.get("offsets.commit.timeout.ms") / 1000,
                                                 fsync=False)
        log.info("console: offsets of group %s reset (%s) on %d partitions", group_id, plan["description"],
                 len(offsets))
        raise web.HTTPSeeOther(f"/groups/{group_id}?" + urlencode({"reset": len(offsets)}))

    def _reset_plan(self, group, form) -> dict:
        strategy = form.get("strategy", "")
        if strategy not in RESET_STRATEGIES:
            raise ConsoleError(400, f"strategy must be one of {', '.join(RESET_STRATEGIES)}, not {strategy!r}")
        topic = (form.get("topic") or "").strip()
        value = (form.get("value") or "").strip()
        number = None
        if strategy in ("offset", "shift"):
            try:
                number = int(value)
            except ValueError:
                raise ConsoleError(400, f"the {strategy} to reset to must be an integer, not {value!r}") from None
        timestamp = _timestamp_param(value) if strategy == "timestamp" else None
        if strategy == "timestamp" and timestamp is None:
            raise ConsoleError(400, "a timestamp reset needs a time (2026-01-31T12:00:00 UTC, or epoch ms)")
        if topic:
            meta = self.broker.partitions.topic(topic)
            if meta is None:
                raise ConsoleError(404, f"unknown topic {topic!r} (UNKNOWN_TOPIC_OR_PARTITION)")
            targets = [(topic, p) for p in range(meta.partition_count)]
        else:
            targets = sorted(group.offsets)
        if not targets:
            raise ConsoleError(400, "the group has no committed offsets: name a topic to reset")
        rows = []
        for tp in targets:
            log_ = msgs.partition_log(self.broker, *tp)
            low, high = log_.log_start_offset, log_.high_watermark
            committed = group.offsets.get(tp)
            current = committed.offset if committed is not None else None
            if strategy == "earliest":
                new = low
            elif strategy == "latest":
                new = high
            elif strategy == "offset":
                new = number
            elif strategy == "shift":
                new = (current if current is not None else high) + number
            else:
                found = log_.offset_for_timestamp(timestamp)
                new = high if found is None else found[0]
            new = min(max(new, low), high)  # Kafka's reset clamps to the log's range
            rows.append({"topic": tp[0], "partition": tp[1], "current": current, "new": new})
        description = f"{strategy}{' ' + value if value else ''}{' on ' + topic if topic else ''}"
        return {"strategy": strategy, "topic": topic, "value": value, "rows": rows, "description": description}

    def _check_origin(self, request: web.Request) -> None:
        """Refuse a cross-site form post: another site's page must not reset offsets here."""
        origin = request.headers.get("Origin")
        if origin and origin != "null" and urlsplit(origin).netloc != request.host:
            raise ConsoleError(403, f"cross-origin request from {origin} refused")

    async def requests(self, request: web.Request) -> web.Response:
        totals = self.history.totals()
        rates = self.history.current_rates()
        rows = []
        for api, stats in sorted((totals or {}).get("requests", {}).items()):
            p99 = stats.get("p99_ms")
            rows.append({"api": api, "count": stats.get("count", 0), "errors": stats.get("errors", 0),
                         "p99_ms": p99 if p99 is not None and p99 == p99 else None, "rate": rates.get(api)})
        metrics = self.broker.metrics
        errors = []
        if metrics is not None and hasattr(metrics, "recent_errors"):
            errors = list(metrics.recent_errors(100))
        apis = self.history.busiest_apis(6)
        window = self.history.window_s
        charts = [line_chart("Request rate per API", {api: list(self.history.request_rate.get(api, ()))
                                                      for api in apis}, unit="/s", window_s=window),
                  line_chart("p99 latency per API", {api: list(self.history.request_p99.get(api, ()))
                                                     for api in apis}, unit="ms", window_s=window)]
        return self._page("requests.html", title="Requests", nav="requests", rows=rows, errors=errors,
                          charts=charts, metrics=totals is not None)

    async def clients(self, request: web.Request) -> web.Response:
        """Client telemetry (KIP-714): what each client instance last pushed."""
        telemetry = self.broker.client_telemetry
        clients = []
        if telemetry is not None:
            samples: dict[str, list] = {}
            for instance_id, _client_id, name, attrs, value in telemetry.samples():
                samples.setdefault(instance_id, []).append({"metric": name, "attributes": attrs, "value": value})
            for instance in sorted(telemetry.instances.values(), key=lambda i: (i.client_id, str(i.instance_id))):
                attrs = instance.attributes
                clients.append({
                    "instance_id": str(instance.instance_id), "client_id": instance.client_id,
                    "software": " ".join(filter(None, (attrs.get("client_software_name"),
                                                       attrs.get("client_software_version")))),
                    "address": attrs.get("client_source_address") or "", "interval_ms": instance.interval_ms,
                    "pushes": instance.pushes, "metrics": samples.get(str(instance.instance_id), [])})
        subscriptions = {}
        try:
            subscriptions = self.broker.metadata.client_metrics_configs()
        except Exception:  # a metadata store that is not reachable: the page still shows the clients
            log.exception("console: reading client metrics subscriptions failed")
        return self._page("clients.html", title="Clients", nav="clients", clients=clients,
                          subscriptions=sorted(subscriptions.items()))


def _int_param(request: web.Request, name: str, default, minimum: int | None = None,
               maximum: int | None = None):
    text = request.query.get(name, "").strip()
    if text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        raise ConsoleError(400, f"{name} must be an integer, not {text!r}") from None
    if minimum is not None and value < minimum:
        raise ConsoleError(400, f"{name} must be at least {minimum}, not {value}")
    if maximum is not None and value > maximum:
        raise ConsoleError(400, f"{name} must be at most {maximum}, not {value}")
    return value


def _timestamp_param(text: str) -> int | None:
    """Epoch milliseconds, or an ISO date-time (UTC unless it names a zone); None when empty."""
    text = text.strip()
    if not text:
        return None
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ConsoleError(400, f"timestamp must be epoch milliseconds or an ISO date-time "
                                f"(2026-01-31T12:00:00), not {text!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp() * 1000)


def _record_row(record, fmt: str) -> dict:
    key_kind, key = msgs.decode(record.key, "text" if fmt == "auto" else fmt)
    value_kind, value = msgs.decode(record.value, fmt)
    return {"offset": record.offset, "timestamp": record.timestamp, "time": _timestamp(record.timestamp),
            "key": key, "key_kind": key_kind, "value": value, "value_kind": value_kind,
            "size": len(record.value or b""),
            "headers": [{"key": k, "value": msgs.decode(v, "text" if fmt == "auto" else fmt)[1]}
                        for k, v in record.headers]}


def _size(value) -> str:
    if value is None:
        return "-"
    for factor, suffix in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if value >= factor:
            return f"{value / factor:.1f} {suffix}"
    return f"{value} B"


def _timestamp(ms) -> str:
    if ms is None or ms < 0:
        return "-"
    if ms < 1e11:  # seconds (e.g. time.time()), not milliseconds
        ms *= 1000
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"
