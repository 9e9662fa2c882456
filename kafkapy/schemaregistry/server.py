"""Confluent Schema Registry's REST API on aiohttp, on the broker's event loop.

Routes, bodies, status codes and error codes follow Confluent's API reference as its clients
(confluent-kafka's SchemaRegistryClient, the serializers) use it. Every answer is JSON with
Content-Type application/vnd.schemaregistry.v1+json; an error is {"error_code", "message"}; an
unexpected exception is logged and answered 500/50001 without a traceback, and the registry keeps
serving. Request bodies are limited in size and accepted with Confluent's content types.
"""
from __future__ import annotations

import json
import logging
import time
from collections import defaultdict

from aiohttp import web

from .errors import RegistryError
from .registry import Registry, parse_version
from .schemas import SCHEMA_TYPES

__all__ = ["RegistryServer", "CONTENT_TYPE"]

log = logging.getLogger(__name__)

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
ACCEPTED_CONTENT_TYPES = {"application/vnd.schemaregistry.v1+json", "application/vnd.schemaregistry+json",
                          "application/json", "application/octet-stream", ""}
MAX_BODY = 4 * 1024 * 1024
LATENCY_BUCKETS_MS = (1, 5, 10, 50, 100, 500, 1000, 5000)
# handlers that change the registry: made by the leader (forwarded to it by the other registries)
WRITE_HANDLERS = {"register", "delete_version", "delete_subject", "put_config", "delete_config", "put_mode",
                  "delete_mode"}
FORWARDED_HEADER = "X-Kafkapy-Forwarded"


def _flag(request: web.Request, name: str, default: bool = False) -> bool:
    value = request.query.get(name)
    return default if value is None else value.strip().lower() == "true"


def _int_query(request: web.Request, name: str, default: int) -> int:
    try:
        return int(request.query.get(name, default))
    except ValueError:
        raise RegistryError.unprocessable(f"Invalid {name} {request.query.get(name)!r}") from None


def _answer(body, status: int = 200) -> web.Response:
    return web.Response(text=json.dumps(body), status=status, content_type=CONTENT_TYPE.split(";")[0])


class RegistryServer:
    """The HTTP side of one broker's registry."""

    def __init__(self, registry: Registry, host: str, port: int):
        self.registry = registry
        self.host, self.port = host, port
        self._runner: web.AppRunner | None = None
        # per route: count, total seconds, bucket counts (registry metrics on /metrics)
        self.latency: dict[str, list] = defaultdict(lambda: [0, 0.0, [0] * len(LATENCY_BUCKETS_MS)])
        self.errors: dict[int, int] = defaultdict(int)
        self.gate = None  # the task reading the schemas topic at start: requests wait for it
        self.elector = None  # elector.LeaderElector: who writes; None writes here (unit tests)
        self.store = None
        self._client = None  # aiohttp.ClientSession for forwarding writes to the leader
        self.auth = None  # auth.BasicAuth when kafkapy.schema.registry.authentication=basic
        self.ssl_context = None  # https:// listener: the broker's key store
        self.client_ssl_context = None  # for forwarding to another registry's https listener

    async def _wait_ready(self) -> None:
        import asyncio

        try:
            await asyncio.wait_for(asyncio.shield(self.gate), 60)
        except asyncio.TimeoutError:
            raise RegistryError.timeout("the registry is still reading its schemas topic") from None
        except Exception as exc:
            raise RegistryError.store_error(f"cannot read the schemas topic: {exc}") from None

    @property
    def url(self) -> str:
        return f"{'https' if self.ssl_context is not None else 'http'}://{self.host}:{self.port}"

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._errors], client_max_size=MAX_BODY)
        r = self
        app.add_routes([
            web.get("/", r.root),
            web.get("/subjects", r.subjects),
            web.get("/subjects/{subject}/versions", r.versions),
            web.post("/subjects/{subject}/versions", r.register),
            web.get("/subjects/{subject}/versions/{version}", r.version),
            web.get("/subjects/{subject}/versions/{version}/schema", r.version_schema),
            web.get("/subjects/{subject}/versions/{version}/referencedby", r.referenced_by),
            web.delete("/subjects/{subject}/versions/{version}", r.delete_version),
            web.post("/subjects/{subject}", r.lookup),
            web.delete("/subjects/{subject}", r.delete_subject),
            web.get("/subjects/{subject}/metadata", r.latest_with_metadata),
            web.get("/schemas", r.schemas),
            web.get("/schemas/types", r.types),
            web.get("/schemas/ids/{id}", r.schema_by_id),
            web.get("/schemas/ids/{id}/schema", r.raw_schema_by_id),
            web.get("/schemas/ids/{id}/versions", r.versions_by_id),
            web.get("/schemas/ids/{id}/subjects", r.subjects_by_id),
            web.get("/schemas/guids/{guid}", r.schema_by_guid),
            web.get("/config", r.get_config),
            web.put("/config", r.put_config),
            web.delete("/config", r.delete_config),
            web.get("/config/{subject}", r.get_config),
            web.put("/config/{subject}", r.put_config),
            web.delete("/config/{subject}", r.delete_config),
            web.get("/mode", r.get_mode),
            web.put("/mode", r.put_mode),
            web.get("/mode/{subject}", r.get_mode),
            web.put("/mode/{subject}", r.put_mode),
            web.delete("/mode/{subject}", r.delete_mode),
            web.post("/compatibility/subjects/{subject}/versions", r.compatibility),
            web.post("/compatibility/subjects/{subject}/versions/{version}", r.compatibility),
            web.get("/contexts", r.contexts),
            web.get("/v1/metadata/id", r.metadata_id),
            web.get("/kafkapy/leader", r.leader),
        ])
        return app

    async def start(self) -> None:
        self._runner = web.AppRunner(self.app(), access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True, ssl_context=self.ssl_context)
        await site.start()
        server = getattr(site, "_server", None)
        if server is not None and server.sockets:
            self.port = server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # -- plumbing -------------------------------------------------------------------------
    @web.middleware
    async def _errors(self, request: web.Request, handler):
        started = time.perf_counter()
        try:
            if self.gate is not None and not self.gate.done():
                await self._wait_ready()
            elif self.gate is not None and self.gate.exception() is not None:
                raise RegistryError.store_error(f"cannot read the schemas topic: {self.gate.exception()}")
            if self.auth is not None:
                principal = self._tls_principal(request) or self.auth.principal(request.headers.get("Authorization"))
                # (a client certificate is the principal, as on a Kafka SSL listener; else the basic login)
                self.auth.authorize(principal, request.remote or "", getattr(handler, "__name__", ""))
            if getattr(handler, "__name__", "") in WRITE_HANDLERS and self.elector is not None:
                response = await self._write(request, handler)
            else:
                response = await handler(request)
        except RegistryError as exc:
            response = _answer(exc.body(), exc.status)
            if exc.status == 401:
                response.headers["WWW-Authenticate"] = 'Basic realm="kafkapy schema registry"'
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            response = _answer({"error_code": exc.status, "message": f"HTTP {exc.status} {exc.reason}"}, exc.status)
        except Exception:
            log.exception("schema registry: %s %s failed", request.method, request.path_qs)
            response = _answer({"error_code": 50001, "message": "Error in the backend data store (logged by the "
                                                                "broker)"}, 500)
        route = request.match_info.route.resource.canonical if request.match_info.route.resource else "unmatched"
        elapsed = time.perf_counter() - started
        stats = self.latency[f"{request.method} {route}"]
        stats[0] += 1
        stats[1] += elapsed
        for i, bound in enumerate(LATENCY_BUCKETS_MS):
            if elapsed * 1000 <= bound:
                stats[2][i] += 1
        if response.status >= 400:
            self.errors[response.status] += 1
        return response

    @staticmethod
    def _tls_principal(request: web.Request):
        """User:<certificate subject> of a client that presented a certificate (mTLS), else None."""
        if request.transport is None:
            return None
        ssl_object = request.transport.get_extra_info("ssl_object")
        if ssl_object is None or not ssl_object.getpeercert(binary_form=True):
            return None
        from ..security.tls import peer_principal

        return peer_principal(ssl_object)

    async def _write(self, request: web.Request, handler) -> web.Response:
        """A write is made by the leader: here when this registry leads (after reading `_schemas` to
        its end, so ids continue after every one handed out), else forwarded to it over HTTP."""
        elector = self.elector
        leader = elector.leader_url or await elector.wait_for_leader(30)
        if leader is None:
            raise RegistryError.forwarding("no schema registry leader is elected yet")
        if leader != elector.own_url:
            if request.headers.get(FORWARDED_HEADER):
                raise RegistryError.forwarding(f"this registry is not the leader (the leader is {leader})")
            return await self._forward(request, leader)
        if self.store is not None:
            from .store import StoreError

            try:
                await self.store.sync()
            except StoreError as exc:
                raise RegistryError.store_error(str(exc)) from None
        return await handler(request)

    async def _forward(self, request: web.Request, leader: str) -> web.Response:
        import aiohttp

        if self._client is None:
            connector = aiohttp.TCPConnector(ssl=self.client_ssl_context) if self.client_ssl_context else None
            self._client = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60), connector=connector)
        body = await request.read()
        headers = {"Content-Type": request.headers.get("Content-Type", CONTENT_TYPE), FORWARDED_HEADER: "1"}
        if "Authorization" in request.headers:  # the leader authorizes the same principal
            headers["Authorization"] = request.headers["Authorization"]
        try:
            async with self._client.request(request.method, leader + request.path_qs, data=body or None,
                                            headers=headers) as answer:
                raw = await answer.read()
                return web.Response(body=raw, status=answer.status,
                                    content_type=answer.content_type or CONTENT_TYPE)
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise RegistryError.forwarding(f"{leader}: {exc}") from None

    @staticmethod
    async def _body(request: web.Request):
        content_type = request.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if content_type not in ACCEPTED_CONTENT_TYPES:
            raise RegistryError(415, 415, "HTTP 415 Unsupported Media Type")
        try:
            raw = await request.read()
        except web.HTTPRequestEntityTooLarge:
            raise RegistryError(413, 413, f"HTTP 413 Request Entity Too Large (at most {MAX_BODY} bytes)") from None
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise RegistryError.bad_request(f"Unexpected character in the JSON body: {exc}") from None
        if not isinstance(body, dict):
            raise RegistryError.unprocessable("The request body must be a JSON object")
        return body

    # -- routes ---------------------------------------------------------------------------
    async def root(self, request: web.Request) -> web.Response:
        return _answer({})

    async def subjects(self, request: web.Request) -> web.Response:
        return _answer(self.registry.subject_list(request.query.get("subjectPrefix", ""), _flag(request, "deleted"),
                                                  _flag(request, "deletedOnly")))

    async def versions(self, request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        versions = self.registry.live_versions(subject, _flag(request, "deleted") or _flag(request, "deletedOnly"))
        if _flag(request, "deletedOnly"):
            versions = [v for v in versions if v.deleted]
        if not versions and not _flag(request, "deletedOnly"):
            raise RegistryError.subject_not_found(subject)
        return _answer([v.version for v in versions])

    async def register(self, request: web.Request) -> web.Response:
        body = await self._body(request)
        answer = await self.registry.register(request.match_info["subject"], body, _flag(request, "normalize"))
        return _answer(answer)

    async def version(self, request: web.Request) -> web.Response:
        version = self.registry.get_version(request.match_info["subject"], request.match_info["version"],
                                            _flag(request, "deleted"))
        return _answer(self.registry.version_body(version))

    async def version_schema(self, request: web.Request) -> web.Response:
        version = self.registry.get_version(request.match_info["subject"], request.match_info["version"],
                                            _flag(request, "deleted"))
        return web.Response(text=self.registry.schemas[version.id].text, content_type=CONTENT_TYPE)

    async def referenced_by(self, request: web.Request) -> web.Response:
        version = self.registry.get_version(request.match_info["subject"], request.match_info["version"], True)
        return _answer(self.registry.referenced_by(version.subject, version.version))

    async def delete_version(self, request: web.Request) -> web.Response:
        return _answer(await self.registry.delete_version(request.match_info["subject"], request.match_info["version"],
                                                          _flag(request, "permanent")))

    async def lookup(self, request: web.Request) -> web.Response:
        body = await self._body(request)
        return _answer(self.registry.lookup(request.match_info["subject"], body, _flag(request, "deleted")))

    async def delete_subject(self, request: web.Request) -> web.Response:
        return _answer(await self.registry.delete_subject(request.match_info["subject"], _flag(request, "permanent")))

    async def latest_with_metadata(self, request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        wanted = {k: v for k, v in request.query.items() if k not in ("deleted", "format")}
        for version in reversed(self.registry.live_versions(subject, _flag(request, "deleted"))):
            properties = (version.metadata or {}).get("properties") or {}
            if all(properties.get(k) == v for k, v in wanted.items()):
                return _answer(self.registry.version_body(version))
        if subject not in self.registry.subjects:
            raise RegistryError.subject_not_found(subject)
        raise RegistryError.schema_not_found(f"Schema with metadata {wanted} not found in subject '{subject}'")

    async def schemas(self, request: web.Request) -> web.Response:
        prefix = request.query.get("subjectPrefix", "")
        deleted, latest_only = _flag(request, "deleted"), _flag(request, "latestOnly")
        out = []
        for subject in self.registry.subject_list(prefix, deleted):
            versions = self.registry.live_versions(subject, deleted)
            for version in versions[-1:] if latest_only else versions:
                out.append(self.registry.version_body(version))
        offset, limit = _int_query(request, "offset", 0), _int_query(request, "limit", -1)
        out = out[max(offset, 0):]
        return _answer(out if limit < 0 else out[:limit])

    async def types(self, request: web.Request) -> web.Response:
        return _answer(list(SCHEMA_TYPES))

    def _id(self, request: web.Request) -> int:
        text = request.match_info["id"]
        try:
            return int(text)
        except ValueError:
            raise RegistryError.schema_not_found(f"Schema {text} not found") from None

    async def schema_by_id(self, request: web.Request) -> web.Response:
        content = self.registry.content(self._id(request))
        body = self.registry.schema_body(content) | {"guid": content.guid}
        if _flag(request, "fetchMaxId"):
            body["maxId"] = self.registry.max_id
        return _answer(body)

    async def schema_by_guid(self, request: web.Request) -> web.Response:
        schema_id = self.registry.by_guid.get(request.match_info["guid"])
        if schema_id is None:
            raise RegistryError.schema_not_found(f"Schema {request.match_info['guid']} not found")
        content = self.registry.content(schema_id)
        return _answer(self.registry.schema_body(content) | {"id": schema_id, "guid": content.guid})

    async def raw_schema_by_id(self, request: web.Request) -> web.Response:
        return web.Response(text=self.registry.content(self._id(request)).text, content_type=CONTENT_TYPE)

    async def versions_by_id(self, request: web.Request) -> web.Response:
        schema_id = self._id(request)
        self.registry.content(schema_id)
        deleted = _flag(request, "deleted")
        return _answer([{"subject": v.subject, "version": v.version}
                        for subject in sorted(self.registry.subjects)
                        for v in self.registry.live_versions(subject, deleted) if v.id == schema_id])

    async def subjects_by_id(self, request: web.Request) -> web.Response:
        schema_id = self._id(request)
        self.registry.content(schema_id)
        deleted = _flag(request, "deleted")
        return _answer(sorted({v.subject for subject in self.registry.subjects
                               for v in self.registry.live_versions(subject, deleted) if v.id == schema_id}))

    async def get_config(self, request: web.Request) -> web.Response:
        return _answer(self.registry.get_config(request.match_info.get("subject"), _flag(request, "defaultToGlobal")))

    async def put_config(self, request: web.Request) -> web.Response:
        return _answer(await self.registry.set_config(request.match_info.get("subject"), await self._body(request)))

    async def delete_config(self, request: web.Request) -> web.Response:
        return _answer(await self.registry.delete_config(request.match_info.get("subject")))

    async def get_mode(self, request: web.Request) -> web.Response:
        return _answer(self.registry.get_mode(request.match_info.get("subject"), _flag(request, "defaultToGlobal")))

    async def put_mode(self, request: web.Request) -> web.Response:
        body = await self._body(request)
        return _answer(await self.registry.set_mode(request.match_info.get("subject"), body.get("mode"),
                                                    _flag(request, "force")))

    async def delete_mode(self, request: web.Request) -> web.Response:
        return _answer(await self.registry.delete_mode(request.match_info["subject"]))

    async def compatibility(self, request: web.Request) -> web.Response:
        body = await self._body(request)
        version = request.match_info.get("version")
        if version is not None:
            parse_version(version)
        return _answer(self.registry.test_compatibility(request.match_info["subject"], version, body,
                                                        _flag(request, "verbose")))

    async def contexts(self, request: web.Request) -> web.Response:
        return _answer(["."])

    async def leader(self, request: web.Request) -> web.Response:
        """kafkapy's own: which registry writes (the group's elected leader) and this one's URL."""
        elector = self.elector
        return _answer({"leader": elector.leader_url if elector else self.url, "this": self.url,
                        "is_leader": bool(elector is None or elector.is_leader)})

    async def metadata_id(self, request: web.Request) -> web.Response:
        broker = getattr(self.registry, "broker", None)
        cluster = getattr(broker, "cluster_id", None)
        return _answer({"scope": {"path": [], "clusters": {"kafka-cluster": cluster,
                                                            "schema-registry-cluster": "schema-registry"}}})
