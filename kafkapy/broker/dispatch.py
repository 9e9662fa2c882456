"""Request routing: header decode, version check, body decode, handler call, response encode.

Every handler has the same shape: `async def handle_x(ctx, request) -> response | None`,
registered with `@handles(XRequest)`. Version negotiation, decode errors and response
framing live here, once, not in the handlers. A handler's module is imported on the first
request of its api key (handlers.HANDLER_MODULES).
"""
from __future__ import annotations

import logging
import time
from importlib import import_module
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterable, Protocol

from ..protocol.errors import ConnectionClosed
from ..protocol.headers import RequestHeader, decode_request_header, encode_response_header
from ..protocol.messages import REQUEST_TYPES
from ..security.principal import ANONYMOUS, KafkaPrincipal
from ..security.quota_tracker import BusyTime
from .handlers import HANDLER_MODULES

if TYPE_CHECKING:
    from ..log.manager import LogManager
    from ..metadata.acls import AclOperation, ResourceType
    from ..metadata.store import MetadataStore
    from ..metrics import BrokerMetrics
    from ..replication.purgatory import Purgatory
    from ..replication.replica_manager import ReplicaManager
    from ..security.session import SecuritySession
    from .config import BrokerConfig
    from .interfaces import HandlerServices, Membership

log = logging.getLogger(__name__)

API_VERSIONS_KEY = 18

Handler = Callable[["RequestContext", Any], Awaitable[Any]]
# api key -> handler; a stand-in until the key's first request imports its module (end of this file)
HANDLERS: dict[int, Handler] = {}


class RequestConnection(Protocol):
    """What a request's context reads of the connection it came on (connection.KafkaConnection)."""

    peer: str
    principal: KafkaPrincipal
    listener: Any  # config.Listener, None on a connection built without one (tests)
    session: SecuritySession
    client_software: tuple[str | None, str | None]  # ApiVersions v3+'s name and version (KIP-714)


class RequestContext:
    """What a handler knows about the request besides its body: the header, the connection, and
    the broker's parts through typed accessors (`ctx.partitions`, `ctx.replicas`, ...) that read
    `services`, the one HandlerServices bundle of the broker (interfaces.py), shared by every
    request."""

    __slots__ = ("services", "connection", "header", "timing")

    def __init__(self, services: HandlerServices, connection: RequestConnection | None,
                 header: RequestHeader | None = None, timing: Any = None):
        self.services = services
        self.connection = connection
        self.header = header
        # metrics (kafkapy/metrics): what the connection reports once the response is written
        self.timing = timing

    def __repr__(self) -> str:
        """The connection and header name the request; the broker's bundle (services) and the
        metrics timing are the same for every request and would only clutter a log line."""
        return f"RequestContext(connection={self.connection!r}, header={self.header!r})"

    # -- the broker's parts (interfaces.HandlerServices) ---------------------------------------
    @property
    def config(self) -> BrokerConfig:
        return self.services.config

    @property
    def metadata(self) -> MetadataStore:
        return self.services.metadata

    @property
    def partitions(self):
        """Topics by name and id and the partition logs hosted here (partitions.PartitionManager)."""
        return self.services.partitions

    @property
    def replicas(self) -> ReplicaManager:
        return self.services.replicas

    @property
    def cluster(self) -> Membership:
        return self.services.cluster

    @property
    def logs(self) -> LogManager:
        return self.services.logs

    @property
    def purgatory(self) -> Purgatory:
        return self.services.purgatory

    @property
    def metrics(self) -> BrokerMetrics:
        return self.services.metrics

    @property
    def group_coordinator(self):
        """The group coordinator, built on first use."""
        return self.services.group_coordinator

    @property
    def transaction_coordinator(self):
        """The transaction coordinator, built on first use."""
        return self.services.transaction_coordinator

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def client_id(self) -> str | None:
        return self.header.client_id

    @property
    def peer(self) -> str:
        return self.connection.peer if self.connection is not None else "-"

    @property
    def principal(self) -> KafkaPrincipal:
        """Who sent the request (User:ANONYMOUS without authentication; in-process calls too)."""
        return self.connection.principal if self.connection is not None else ANONYMOUS

    @property
    def listener_name(self) -> str | None:
        listener = self.connection.listener if self.connection is not None else None
        return listener.name if listener is not None else None

    @property
    def client_host(self) -> str:
        """The client's address without the port (ACL host matching)."""
        peer = self.peer
        return peer.rsplit(":", 1)[0] if ":" in peer else peer

    # -- authorization (security/authorizer.py); without authorizer.class.name every check is True, and
    # so it is for a context without a connection: a call from inside the process, not a client's request
    @property
    def _authorizer(self):
        return self.services.authorizer if self.connection is not None else None

    @property
    def authorizing(self) -> bool:
        """Whether this request's checks can refuse anything (an authorizer, and a client's connection)."""
        return self._authorizer is not None

    def authorized(self, operation: AclOperation, resource_type: ResourceType, name: str,
                   log_if_denied: bool = True) -> bool:
        """May this request's principal, from its host, perform `operation` on the resource?"""
        authorizer = self._authorizer
        if authorizer is None:
            return True
        return authorizer.authorize(self.principal, self.client_host, operation, resource_type, name,
                                    log_if_denied)

    def authorized_cluster(self, operation: AclOperation, log_if_denied: bool = True) -> bool:
        """`authorized` on the CLUSTER resource (kafka-cluster)."""
        from ..metadata.acls import CLUSTER_RESOURCE_NAME, ResourceType

        return self.authorized(operation, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME, log_if_denied)

    def authorized_names(self, operation: AclOperation, resource_type: ResourceType,
                         names: Iterable[str], log_if_denied: bool = True) -> set[str]:
        """The names among `names` this request may perform `operation` on (KafkaApis' filterByAuthorized)."""
        authorizer = self._authorizer
        if authorizer is None:
            return set(names)
        principal, host = self.principal, self.client_host
        return {name for name in set(names)
                if authorizer.authorize(principal, host, operation, resource_type, name, log_if_denied)}

    def unauthorized_names(self, operation: AclOperation, resource_type: ResourceType,
                           names: Iterable[str]) -> frozenset[str]:
        """The names among `names` this request may not perform `operation` on (empty without an authorizer)."""
        authorizer = self._authorizer
        if authorizer is None:
            return frozenset()
        principal, host = self.principal, self.client_host
        return frozenset(name for name in set(names)
                         if not authorizer.authorize(principal, host, operation, resource_type, name))

    def authorized_by_resource_type(self, operation: AclOperation, resource_type: ResourceType) -> bool:
        """May the principal perform `operation` on some resource of the type (Kafka's authorizeByResourceType)?"""
        authorizer = self._authorizer
        if authorizer is None:
            return True
        return authorizer.authorize_by_resource_type(self.principal, self.client_host, operation, resource_type)

    def authorized_operations(self, resource_type: ResourceType, name: str) -> int:
        """The authorized-operations bit field for a response (every supported operation without an authorizer)."""
        authorizer = self._authorizer
        if authorizer is None:
            from ..security.authorizer import SUPPORTED_OPERATIONS

            return sum(1 << op for op in SUPPORTED_OPERATIONS[resource_type])
        return authorizer.authorized_operations(self.principal, self.client_host, resource_type, name)


def api_keys(services: HandlerServices) -> list:
    """ApiVersions' list of the api keys this broker advertises, with their version ranges."""
    from ..protocol.messages import ApiVersionsResponse

    return [ApiVersionsResponse.ApiVersion(api_key=key, min_version=lo, max_version=hi)
            for key, (lo, hi) in sorted(services.advertised_versions.items())]


def unsupported_version_response(services: HandlerServices):
    """The v0-layout answer to an ApiVersions version this broker does not know (KIP-511)."""
    from ..protocol.error_codes import ErrorCode
    from ..protocol.messages import ApiVersionsResponse

    return ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=api_keys(services))


def handles(request_cls: type) -> Callable[[Handler], Handler]:
    """Register the decorated coroutine as the handler of `request_cls`'s api key."""

    def register(fn: Handler) -> Handler:
        HANDLERS[request_cls.API_KEY] = fn
        return fn

    return register


async def handle_frame(ctx: RequestContext, frame: bytes) -> list | None:
    """Handle one request frame; returns the response as buffers, or None for no response."""
    started = time.perf_counter()
    header, pos = decode_request_header(frame)
    ctx.header = header
    key = header.api_key
    version = header.api_version
    services = ctx.services
    versions = services.advertised_versions.get(key)
    if versions is None:
        raise ConnectionClosed(f"unsupported api key {key} (client {header.client_id!r})")
    if not versions[0] <= version <= versions[1]:
        if key == API_VERSIONS_KEY:
            response = unsupported_version_response(services)
            return [encode_response_header(header.correlation_id, key, 0)] + response.encode_parts(0)
        raise ConnectionClosed(
            f"unsupported version {version} of api key {key} (supported {versions[0]}-{versions[1]},"
            f" client {header.client_id!r})")
    connection = ctx.connection
    if connection is not None:
        # SASL: before authentication only ApiVersions and the SASL requests pass (security/session.py)
        connection.session.check_request(key, version)
    request = REQUEST_TYPES[key].decode(frame, version, pos)
    faults = services.faults
    if faults is not None:
        # fault injection (broker/faults.py): records the request; may delay it, answer an error
        # instead of the handler, never answer (DROP) or close the connection
        injected = await faults.intercept(ctx, request)
        if injected is not None:
            if injected is faults.DROP:
                return None
            return [encode_response_header(header.correlation_id, key, version)] + injected.encode_parts(version)
    quotas = services.client_quotas.current
    metrics = services.metrics
    busy = None
    if quotas is None or connection is None:
        if metrics is not None and metrics.detailed:
            # local (busy) against remote (parked) time for the request metrics
            timed = BusyTime(HANDLERS[key](ctx, request))
            response = await timed
            busy = timed.seconds
        else:
            response = await HANDLERS[key](ctx, request)
    else:
        # client quotas (security/quotas.py): strict controller mutation quotas before the handler;
        # after it, the request's bytes and busy time (not time parked in purgatory) are recorded,
        # which may set the response's throttle_time_ms and mute the connection
        quotas.before_request(ctx, key, request)
        timed = BusyTime(HANDLERS[key](ctx, request))
        response = await timed
        quotas.after_request(ctx, key, request, response, len(frame), timed.seconds)
        busy = timed.seconds
    if metrics is not None:
        ctx.timing = metrics.on_response(ctx, key, version, request, response, started, busy)
    if response is None:
        return None
    return [encode_response_header(header.correlation_id, key, version)] + response.encode_parts(version)


def _import_on_first_request(api_key: int, module: str) -> Handler:
    """The stand-in handler of `api_key` until its module is imported: the first request imports
    it, whose @handles replaces this entry, and goes on to the real handler, as every later
    request does directly (no check on the way)."""
    name = f"{__package__}.handlers.{module}"

    async def handle_first_request(ctx: RequestContext, request: Any) -> Any:
        import_module(name)
        handler = HANDLERS[api_key]
        if handler is handle_first_request:
            raise RuntimeError(f"{name} registers no handler for api key {api_key} (handlers.HANDLER_MODULES)")
        return await handler(ctx, request)

    return handle_first_request


for _key, _module in HANDLER_MODULES.items():
    HANDLERS.setdefault(_key, _import_on_first_request(_key, _module))
del _key, _module
