"""A small synchronous Kafka client for the admin command line.

Blocking sockets, one request at a time: a command sends a handful of requests, so there is
nothing to pipeline. The client bootstraps from the first address that answers, asks every broker
it talks to for its ApiVersions and sends each request at the highest version both sides know
(capped by the caller where a newer version changes the shape it relies on), so it speaks to old
brokers and new ones. Requests are routed with Metadata (partition leaders, the controller) and
FindCoordinator (group coordinators). Requests and responses are kafkapy.protocol's generated codecs.
"""
from __future__ import annotations

import socket
import ssl
import struct
import time
from dataclasses import dataclass, field

from ..net.sasl_client import SASL_CLIENT_MECHANISMS, SaslClientError, authenticate_blocking
from ..protocol.error_codes import ErrorCode
from ..protocol.headers import decode_response_header, encode_request_header
from ..protocol.messages import (
    RESPONSE_TYPES,
    ApiVersionsRequest,
    ApiVersionsResponse,
    FindCoordinatorRequest,
    MetadataRequest,
)
from .errors import CliError, KafkaApiError, UnreachableError

__all__ = ["AdminClient", "BrokerAddress", "parse_bootstrap", "topic_partitions"]

_SIZE = struct.Struct(">i")
_MAX_RESPONSE = 256 * 1024 * 1024
_RETRIABLE = {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
              ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.NOT_CONTROLLER}


@dataclass(slots=True, frozen=True)
class BrokerAddress:
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


def parse_bootstrap(text: str) -> list[BrokerAddress]:
    """"host:port,host:port" (an optional PLAINTEXT:// style prefix is dropped) as addresses."""
    addresses = []
    for item in text.split(","):
        item = item.strip()
        if "://" in item:
            item = item.split("://", 1)[1]
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit() or not 0 < int(port) < 65536:
            raise CliError(f"bad bootstrap server {item!r}: expected host:port", exit_code=2)
        addresses.append(BrokerAddress(host.strip("[]") or "127.0.0.1", int(port)))
    if not addresses:
        raise CliError("no bootstrap server given: set --bootstrap-server or KAFKAPY_BOOTSTRAP", exit_code=2)
    return addresses


@dataclass(slots=True)
class SecurityOptions:
    """Kafka's client properties for TLS and SASL (--command-config), the subset the CLI supports."""

    protocol: str = "PLAINTEXT"
    sasl_mechanism: str = "PLAIN"
    username: str | None = None
    password: str | None = None
    ssl_cafile: str | None = None
    ssl_check_hostname: bool = True
    extra: dict = field(default_factory=dict)

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> SecurityOptions:
        import re

        options = cls(protocol=props.get("security.protocol", "PLAINTEXT").upper(),
                      sasl_mechanism=props.get("sasl.mechanism", "PLAIN").upper(),
                      username=props.get("sasl.username"), password=props.get("sasl.password"),
                      ssl_cafile=props.get("ssl.truststore.location") or props.get("ssl.cafile"),
                      ssl_check_hostname=props.get("ssl.endpoint.identification.algorithm", "https") != "")
        jaas = props.get("sasl.jaas.config")
        if jaas:
            for key, value in re.findall(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"', jaas):
                if key == "username":
                    options.username = value
                elif key == "password":
                    options.password = value
        if options.protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
            raise CliError(f"unknown security.protocol {options.protocol!r}", exit_code=2)
        return options


class Connection:
    """One blocking socket to one broker, with the API versions it supports."""

    def __init__(self, address: BrokerAddress, *, timeout_s: float, client_id: str,
                 security: SecurityOptions):
        self.address = address
        self.client_id = client_id
        self.timeout_s = timeout_s
        self._correlation = 0
        try:
            sock = socket.create_connection((address.host, address.port), timeout=min(timeout_s, 10.0))
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            if isinstance(exc, (socket.timeout, TimeoutError)):
                reason = "timed out"
            raise UnreachableError(f"cannot reach {address} ({reason.lower()}); is a broker running? "
                                   f"set --bootstrap-server or KAFKAPY_BOOTSTRAP") from None
        sock.settimeout(timeout_s)
        if security.protocol in ("SSL", "SASL_SSL"):
            context = ssl.create_default_context(cafile=security.ssl_cafile)
            context.check_hostname = security.ssl_check_hostname
            try:
                sock = context.wrap_socket(sock, server_hostname=address.host)
            except (ssl.SSLError, OSError) as exc:
                sock.close()
                raise UnreachableError(f"TLS handshake with {address} failed: {exc}") from None
        self.sock = sock
        self.versions: dict[int, tuple[int, int]] = {}
        self._api_versions()
        if security.protocol.startswith("SASL"):
            self._authenticate(security)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def _exchange(self, api_key: int, version: int, parts: list, expect_response: bool = True) -> memoryview | None:
        self._correlation += 1
        correlation_id = self._correlation
        header = encode_request_header(api_key, version, correlation_id, self.client_id)
        payload = b"".join([header, *parts])
        try:
            self.sock.sendall(_SIZE.pack(len(payload)) + payload)
            if not expect_response:
                return None
            size = _SIZE.unpack(self._read(4))[0]
            if not 4 <= size <= _MAX_RESPONSE:
                raise CliError(f"{self.address} sent a response of impossible size {size}")
            frame = memoryview(self._read(size))
        except (socket.timeout, TimeoutError):
            raise CliError(f"{self.address} did not answer within {self.timeout_s:g} s; raise --timeout") from None
        except OSError as exc:
            raise UnreachableError(f"connection to {self.address} lost ({exc.strerror or exc}); "
                                   f"is the broker running?") from None
        if _SIZE.unpack_from(frame, 0)[0] != correlation_id:
            raise CliError(f"{self.address} answered out of order")
        return frame

    def _read(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(min(n, 1 << 20))
            if not chunk:
                raise ConnectionResetError(0, "the broker closed the connection")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def send(self, request, version: int):
        api_key = request.API_KEY
        frame = self._exchange(api_key, version, request.encode_parts(version))
        try:
            _, pos = decode_response_header(frame, api_key, version)
            return RESPONSE_TYPES[api_key].decode(frame, version, pos)
        except Exception as exc:  # a malformed header or body
            raise CliError(f"cannot decode {type(request).__name__[:-7]} v{version} response from "
                           f"{self.address}: {exc}") from None

    def send_only(self, request, version: int) -> None:
        """Send a request the broker does not answer (Produce with acks=0)."""
        self._exchange(request.API_KEY, version, request.encode_parts(version), expect_response=False)

    def _api_versions(self) -> None:
        request = ApiVersionsRequest(client_software_name="kafkapy-cli", client_software_version="1")
        frame = self._exchange(ApiVersionsRequest.API_KEY, 3, request.encode_parts(3))
        try:  # a broker that does not know v3 answers in v0's shape with UNSUPPORTED_VERSION
            response = ApiVersionsResponse.decode(frame, 3, 4)
        except Exception:
            response = None
        if response is None or response.error_code == ErrorCode.UNSUPPORTED_VERSION:
            response = ApiVersionsResponse.decode(frame, 0, 4)
        if response.error_code:
            raise KafkaApiError(response.error_code, f"ApiVersions to {self.address} failed")
        self.versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}

    def version_for(self, message_type, cap: int | None = None, floor: int = 0) -> int:
        ours_min, ours_max = message_type.VALID_VERSIONS
        name = message_type.__name__.removesuffix("Request")
        supported = self.versions.get(message_type.API_KEY)
        if supported is None:
            raise CliError(f"{self.address} does not support {name} (api key {message_type.API_KEY}); "
                           f"the broker is too old or the feature is off")
        high = min(ours_max, supported[1], ours_max if cap is None else cap)
        if high < max(ours_min, supported[0], floor):
            raise CliError(f"{self.address} supports {name} v{supported[0]}-{supported[1]}, "
                           f"which this command cannot use")
        return high

    def _authenticate(self, security: SecurityOptions) -> None:
        mechanism = security.sasl_mechanism
        if security.username is None or security.password is None:
            raise CliError("SASL needs sasl.username and sasl.password (or sasl.jaas.config) in --command-config",
                           exit_code=2)
        if mechanism not in SASL_CLIENT_MECHANISMS:
            raise CliError(f"unsupported sasl.mechanism {mechanism}", exit_code=2)
        try:
            authenticate_blocking(self.send, mechanism=mechanism, username=security.username,
                                  password=security.password)
        except SaslClientError as exc:
            if exc.stage == "handshake":
                raise KafkaApiError(exc.error_code, f"SASL mechanism {mechanism} refused",
                                    f"the broker offers {', '.join(exc.mechanisms) or 'none'}") from None
            raise KafkaApiError(exc.error_code, f"authentication as {security.username} failed",
                                "check the credentials in --command-config") from None


class AdminClient:
    """Connections to a cluster, opened on demand, with request routing."""

    def __init__(self, bootstrap: str, *, timeout_s: float = 30.0, client_id: str = "kafkapy-cli",
                 security: SecurityOptions | None = None):
        self.bootstrap = parse_bootstrap(bootstrap)
        self.timeout_s = timeout_s
        self.client_id = client_id
        self.security = security or SecurityOptions()
        self._by_address: dict[BrokerAddress, Connection] = {}
        self._brokers: dict[int, BrokerAddress] = {}
        self._any: Connection | None = None
        self.cluster_id: str | None = None
        self.controller_id: int = -1

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for conn in self._by_address.values():
            conn.close()
        self._by_address.clear()

    def _connect(self, address: BrokerAddress) -> Connection:
        conn = self._by_address.get(address)
        if conn is None:
            conn = Connection(address, timeout_s=self.timeout_s, client_id=self.client_id, security=self.security)
            self._by_address[address] = conn
        return conn

    def any_connection(self) -> Connection:
        if self._any is not None:
            return self._any
        failure: UnreachableError | None = None
        for address in self.bootstrap:
            try:
                self._any = self._connect(address)
                return self._any
            except UnreachableError as exc:
                failure = exc
        if len(self.bootstrap) > 1:
            raise UnreachableError(f"cannot reach any of {','.join(map(str, self.bootstrap))}; is a broker "
                                   f"running? set --bootstrap-server or KAFKAPY_BOOTSTRAP")
        raise failure

    def node(self, node_id: int) -> Connection:
        if node_id not in self._brokers:
            self.metadata([])
        address = self._brokers.get(node_id)
        if address is None:
            raise CliError(f"broker {node_id} is not in the cluster's metadata")
        return self._connect(address)

    def send(self, request, *, node: int | None = None, cap: int | None = None, floor: int = 0,
             conn: Connection | None = None):
        """Send to `node` (or `conn`, else any broker) at the best common version."""
        if conn is None:
            conn = self.any_connection() if node is None else self.node(node)
        return conn.send(request, conn.version_for(type(request), cap, floor))

    def version(self, message_type, node: int | None = None, cap: int | None = None) -> int:
        conn = self.any_connection() if node is None else self.node(node)
        return conn.version_for(message_type, cap)

    def retrying(self, call):
        """`call()` again while it fails with a coordinator or leader that is loading or moving (Kafka's
        retriable errors for admin calls), until the timeout."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                return call()
            except KafkaApiError as exc:
                if exc.code not in _RETRIABLE or time.monotonic() > deadline:
                    raise
            time.sleep(0.2)

    # -- routing ---------------------------------------------------------------------------

    def metadata(self, topics: list[str] | None = None, *, auto_create: bool = False):
        """Metadata for `topics` (None: every topic; []: none, only brokers)."""
        conn = self.any_connection()
        version = conn.version_for(MetadataRequest, cap=12)
        if topics is None:
            request_topics = None if version >= 1 else []
        else:
            request_topics = [MetadataRequest.MetadataRequestTopic(name=t) for t in topics]
        response = conn.send(MetadataRequest(topics=request_topics, allow_auto_topic_creation=auto_create), version)
        self._brokers = {b.node_id: BrokerAddress(b.host, b.port) for b in response.brokers}
        self.cluster_id = response.cluster_id
        self.controller_id = response.controller_id
        return response

    def brokers(self) -> dict[int, BrokerAddress]:
        if not self._brokers:
            self.metadata([])
        return dict(self._brokers)

    def controller(self) -> int:
        self.metadata([])
        if self.controller_id < 0:
            return next(iter(self._brokers))
        return self.controller_id

    def coordinator(self, group: str) -> int:
        """The node id of `group`'s coordinator (retried while it loads or moves)."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            conn = self.any_connection()
            version = conn.version_for(FindCoordinatorRequest)
            if version >= 4:
                response = conn.send(FindCoordinatorRequest(key_type=0, coordinator_keys=[group]), version)
                entry = response.coordinators[0]
                code, node_id, host, port = entry.error_code, entry.node_id, entry.host, entry.port
            else:
                response = conn.send(FindCoordinatorRequest(key=group, key_type=0), version)
                code, node_id, host, port = response.error_code, response.node_id, response.host, response.port
            if code == 0:
                self._brokers.setdefault(node_id, BrokerAddress(host, port))
                return node_id
            if code not in _RETRIABLE or time.monotonic() > deadline:
                raise KafkaApiError(code, f"cannot find the coordinator of group '{group}'")
            time.sleep(0.2)

    def leaders(self, topics: list[str]) -> dict[tuple[str, int], int]:
        """(topic, partition) -> leader node id; raises for a topic that does not exist."""
        response = self.metadata(topics)
        result = {}
        for topic in response.topics:
            if topic.error_code:
                raise KafkaApiError(topic.error_code, f"topic '{topic.name}' is not available")
            for p in topic.partitions:
                result[(topic.name, p.partition_index)] = p.leader_id
        return result


def topic_partitions(client: AdminClient, topics: list[str]) -> dict[str, list[int]]:
    """Each topic's partition ids; raises UNKNOWN_TOPIC_OR_PARTITION for one that does not exist."""
    response = client.metadata(topics)
    result = {}
    for topic in response.topics:
        if topic.error_code:
            raise KafkaApiError(topic.error_code, f"topic '{topic.name}' does not exist"
                                if topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                                else f"topic '{topic.name}' is not available")
        result[topic.name] = sorted(p.partition_index for p in topic.partitions)
    return result
