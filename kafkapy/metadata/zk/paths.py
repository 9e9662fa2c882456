"""The ZooKeeper layout of a Kafka 3.7 cluster in ZooKeeper mode: znode paths and their JSON.

Pure functions and records, no ZooKeeper client: `encode_*` returns the bytes a znode holds and
`decode_*` reads them back. The shapes are byte-for-byte what Kafka 3.7 writes (section 1 of
`kafka-zk-mode.md`) because real brokers and controllers read what we write and vice versa.
Readers never depend on key order: Kafka writes its JSON through Jackson maps whose order is not
fixed. A znode version (CAS token, partition epoch) is never stored inside the JSON; callers get it
from the znode's stat.

The ACL znodes are in acl_znodes.py and the JSON helpers (and ZnodeDecodeError) in
znode_json.py; their public names are re-exported here.
"""
from __future__ import annotations

import json
import re
import urllib.parse
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..ids import uuid_from_kafka_str, uuid_to_kafka_str
from .acl_znodes import (ACL_CHANGE_PREFIX, ACL_RESOURCE_TYPE_NAMES, EXTENDED_ACL_CHANGES_PATH, EXTENDED_ACL_PATH,
                         LITERAL_ACL_CHANGES_PATH, LITERAL_ACL_PATH, acl_change_path, acl_path,
                         acl_persistent_paths, acl_resource_type_enum_name, acl_resource_type_name, acl_root_path,
                         decode_acl_change, decode_acls, encode_acl_change, encode_acls)
from .znode_json import ZnodeDecodeError, _dump, _int, _int_list, _load_object, _now_ms, _require

__all__ = [
    "ACL_CHANGE_PREFIX", "ADMIN_PATH", "BROKER_IDS_PATH", "BROKER_SEQID_PATH", "BrokerRegistration",
    "CLUSTER_ID_PATH", "CONFIG_CHANGES_PATH", "CONFIG_CHANGE_PREFIX", "CONFIG_ENTITY_TYPES", "CONFIG_PATH",
    "CONSUMERS_PATH", "CONTROLLER_EPOCH_PATH", "CONTROLLER_PATH", "DELETE_TOPICS_PATH", "EXTENDED_ACL_CHANGES_PATH",
    "EXTENDED_ACL_PATH", "Endpoint", "FEATURE_PATH", "FinalizedFeatures", "ISR_CHANGE_NOTIFICATION_PATH",
    "ISR_CHANGE_PREFIX", "LITERAL_ACL_CHANGES_PATH", "LITERAL_ACL_PATH", "LOG_DIR_EVENT_PATH", "LOG_DIR_EVENT_PREFIX",
    "LeaderIsr", "PERSISTENT_PATHS", "PREFERRED_REPLICA_ELECTION_PATH", "PRODUCER_ID_BLOCK_PATH",
    "PRODUCER_ID_BLOCK_SIZE", "ProducerIdBlock", "REASSIGN_PARTITIONS_PATH", "TOPICS_PATH", "TopicAssignment",
    "ACL_RESOURCE_TYPE_NAMES", "ZnodeDecodeError", "acl_change_path", "acl_path", "acl_persistent_paths",
    "acl_resource_type_enum_name", "acl_resource_type_name", "acl_root_path",
    "broker_path", "config_entity_path", "config_entity_type_path", "decode_acl_change", "decode_acls",
    "decode_broker", "decode_cluster_id", "decode_config", "decode_config_change", "decode_controller",
    "decode_controller_epoch", "decode_feature", "decode_isr_change", "decode_log_dir_event",
    "decode_partition_state", "decode_preferred_replica_election", "decode_producer_id_block",
    "decode_reassignment", "decode_topic", "delete_topic_path", "desanitize_entity_name", "encode_acl_change",
    "encode_acls", "encode_broker", "encode_cluster_id", "encode_config", "encode_config_change",
    "encode_controller", "encode_controller_epoch", "encode_feature", "encode_isr_change", "encode_log_dir_event",
    "encode_partition_state", "encode_preferred_replica_election", "encode_producer_id_block",
    "encode_reassignment", "encode_topic", "partition_state_path", "sanitize_entity_name", "sequence_number",
    "topic_partition_path", "topic_partitions_path", "topic_path",
]


# -- paths -----------------------------------------------------------------------------------------------

CLUSTER_ID_PATH = "/cluster/id"
CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
CONSUMERS_PATH = "/consumers"
BROKER_IDS_PATH = "/brokers/ids"
BROKER_SEQID_PATH = "/brokers/seqid"
TOPICS_PATH = "/brokers/topics"
ADMIN_PATH = "/admin"
DELETE_TOPICS_PATH = "/admin/delete_topics"
REASSIGN_PARTITIONS_PATH = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION_PATH = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION_PATH = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
LOG_DIR_EVENT_PATH = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
CONFIG_PATH = "/config"
CONFIG_CHANGES_PATH = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
CONFIG_ENTITY_TYPES = ("topics", "clients", "users", "brokers", "ips")
PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"
PRODUCER_ID_BLOCK_SIZE = 1000
FEATURE_PATH = "/feature"
DELEGATION_TOKENS_PATH = "/delegation_token/tokens"
DELEGATION_TOKEN_CHANGES_PATH = "/delegation_token/token_changes"

# What every broker creates at startup if missing (KafkaServer does the same), so that child
# watches and sequential creates under them never hit NONODE.
PERSISTENT_PATHS: tuple[str, ...] = (
    CONSUMERS_PATH, BROKER_IDS_PATH, TOPICS_PATH, BROKER_SEQID_PATH, CONFIG_CHANGES_PATH,
    *(f"{CONFIG_PATH}/{entity_type}" for entity_type in CONFIG_ENTITY_TYPES),
    DELETE_TOPICS_PATH, ISR_CHANGE_NOTIFICATION_PATH, PRODUCER_ID_BLOCK_PATH, LOG_DIR_EVENT_PATH,
)


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS_PATH}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}"


def topic_partitions_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions"


def topic_partition_path(topic: str, partition: int) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions/{partition}/state"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS_PATH}/{topic}"


def config_entity_type_path(entity_type: str) -> str:
    return f"{CONFIG_PATH}/{entity_type}"


def config_entity_path(entity_type: str, name: str) -> str:
    """`name` is the znode name: already sanitized (see sanitize_entity_name) for users and clients."""
    return f"{CONFIG_PATH}/{entity_type}/{name}"


def sequence_number(node_name: str, prefix: str) -> int:
    """The counter ZooKeeper appended to a persistent-sequential node (`config_change_0000000007` -> 7)."""
    if not node_name.startswith(prefix) or not node_name[len(prefix):].isdigit():
        raise ZnodeDecodeError(f"{node_name!r} is not a {prefix}<sequence> node")
    return int(node_name[len(prefix):])


# Kafka's Sanitizer: java.net.URLEncoder (which also escapes '~' and encodes ' ' as '+'), then
# '+' -> %20 and '*' -> %2A. quote() differs from URLEncoder only in leaving '~' alone.
def sanitize_entity_name(name: str) -> str:
    """A user principal or client id as Kafka spells it in a znode name (URL-encoded)."""
    return urllib.parse.quote(name, safe="").replace("~", "%7E")


def desanitize_entity_name(znode_name: str) -> str:
    return urllib.parse.unquote(znode_name)


# -- /cluster/id, /controller, /controller_epoch ---------------------------------------------------------

def encode_cluster_id(cluster_id: str) -> bytes:
    # "version" is the *string* "1" here, unlike every other znode.
    return _dump({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    return _require(_load_object(data, CLUSTER_ID_PATH), "id", str, CLUSTER_ID_PATH)


def encode_controller(broker_id: int, timestamp_ms: int | None = None) -> bytes:
    # kraftControllerEpoch -1: this controller is a ZooKeeper-mode broker, not a migrating KRaft one.
    return _dump({"version": 2, "brokerid": broker_id,
                  "timestamp": str(_now_ms() if timestamp_ms is None else timestamp_ms),
                  "kraftControllerEpoch": -1})


def decode_controller(data: bytes) -> int:
    """The broker id of the active controller (all a ZooKeeper-mode broker reads of /controller)."""
    return _int(_load_object(data, CONTROLLER_PATH), "brokerid", CONTROLLER_PATH)


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode("ascii")


def decode_controller_epoch(data: bytes) -> int:
    try:
        return int(data.decode("ascii").strip())
    except (UnicodeDecodeError, ValueError) as exc:
        raise ZnodeDecodeError(f"{CONTROLLER_EPOCH_PATH}: not a decimal epoch: {data[:50]!r}") from exc


# -- /brokers/ids/<id> -----------------------------------------------------------------------------------

_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# Kafka's endpoint syntax: LISTENER://host:port, with an IPv6 host optionally in brackets and an
# empty host allowed (it means "all interfaces" on the listener side).
_ENDPOINT_RE = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*?)\]?:(-?[0-9]+)$")


@dataclass(slots=True)
class Endpoint:
    """One advertised listener of a broker."""

    listener: str
    security_protocol: str
    host: str
    port: int

    def connection_string(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener}://{host}:{self.port}"


@dataclass(slots=True)
class BrokerRegistration:
    """The content of /brokers/ids/<id>: who a live broker is and where to reach it.

    `features` maps a feature name to its supported (min_version, max_version); a 3.7 broker
    advertises none. The broker epoch is not here: it is the znode's czxid.
    """

    broker_id: int
    endpoints: list[Endpoint]
    rack: str | None = None
    features: dict[str, tuple[int, int]] = field(default_factory=dict)
    timestamp_ms: int = field(default_factory=_now_ms)
    jmx_port: int = -1

    def endpoint(self, listener_name: str) -> Endpoint | None:
        for endpoint in self.endpoints:
            if endpoint.listener == listener_name:
                return endpoint
        return None


def encode_broker(registration: BrokerRegistration) -> bytes:
    """Broker JSON v5 (what IBP >= 2.7 brokers write)."""
    # Pre-listener clients read the top-level host/port, which Kafka fills from the first endpoint
    # whose *security protocol* is PLAINTEXT, whatever its listener name.
    plaintext = next((e for e in registration.endpoints if e.security_protocol == "PLAINTEXT"), None)
    body: dict[str, Any] = {
        "version": 5,
        "host": plaintext.host if plaintext is not None else None,
        "port": plaintext.port if plaintext is not None else -1,
        "jmx_port": registration.jmx_port,
        "timestamp": str(registration.timestamp_ms),
        "endpoints": [e.connection_string() for e in registration.endpoints],
        "listener_security_protocol_map": {e.listener: e.security_protocol for e in registration.endpoints},
    }
    if registration.rack is not None:
        body["rack"] = registration.rack
    body["features"] = {name: {"min_version": lo, "max_version": hi}
                        for name, (lo, hi) in registration.features.items()}
    return _dump(body)


def decode_broker(broker_id: int, data: bytes) -> BrokerRegistration:
    """Reads broker JSON v1-v5; v1 has only host/port, v2-v3 lack the listener->protocol map."""
    what = broker_path(broker_id)
    obj = _load_object(data, what)
    version = _int(obj, "version", what)
    jmx_port = _int(obj, "jmx_port", what)  # Kafka requires it even though nobody uses it
    if version < 1:
        raise ZnodeDecodeError(f"{what}: unsupported broker registration version {version}")
    if version == 1:
        host = _require(obj, "host", str, what)
        endpoints = [Endpoint("PLAINTEXT", "PLAINTEXT", host, _int(obj, "port", what))]
    else:
        protocol_map = obj.get("listener_security_protocol_map")
        if protocol_map is None:
            # Without the map, a listener name must itself be a security protocol.
            protocol_map = {name: name for name in _SECURITY_PROTOCOLS}
        elif not isinstance(protocol_map, dict):
            raise ZnodeDecodeError(f"{what}: malformed listener_security_protocol_map {protocol_map!r}")
        raw_endpoints = _require(obj, "endpoints", list, what)
        endpoints = []
        for raw in raw_endpoints:
            match = _ENDPOINT_RE.match(raw) if isinstance(raw, str) else None
            if match is None:
                raise ZnodeDecodeError(f"{what}: malformed endpoint {raw!r}")
            listener, host, port = match.group(1), match.group(2), int(match.group(3))
            protocol = protocol_map.get(listener)
            if not isinstance(protocol, str):
                raise ZnodeDecodeError(f"{what}: no security protocol for listener {listener!r}")
            endpoints.append(Endpoint(listener, protocol, host, port))
    rack = obj.get("rack")
    features: dict[str, tuple[int, int]] = {}
    raw_features = obj.get("features") or {}
    if not isinstance(raw_features, dict):
        raise ZnodeDecodeError(f"{what}: malformed features {raw_features!r}")
    for name, versions in raw_features.items():
        if not isinstance(versions, dict):
            raise ZnodeDecodeError(f"{what}: malformed feature {name!r}: {versions!r}")
        features[name] = (_int(versions, "min_version", what), _int(versions, "max_version", what))
    timestamp = obj.get("timestamp")
    try:
        timestamp_ms = int(timestamp) if timestamp is not None else -1
    except (TypeError, ValueError):
        timestamp_ms = -1  # informational only; Kafka never parses it either
    return BrokerRegistration(broker_id, endpoints, rack if isinstance(rack, str) else None, features,
                              timestamp_ms, jmx_port)


# -- /brokers/topics/<t> ---------------------------------------------------------------------------------

@dataclass(slots=True)
class TopicAssignment:
    """The content of /brokers/topics/<t>: replicas per partition and any reassignment in flight.

    `adding`/`removing` hold only partitions that are being reassigned.
    """

    name: str
    topic_id: uuid.UUID | None
    partitions: dict[int, list[int]]
    adding: dict[int, list[int]] = field(default_factory=dict)
    removing: dict[int, list[int]] = field(default_factory=dict)


def encode_topic(assignment: TopicAssignment) -> bytes:
    """Topic JSON v3 with the base64 topic id (Kafka omits `topic_id` only when it has none)."""
    def as_json(replicas: Mapping[int, list[int]]) -> dict[str, list[int]]:
        return {str(p): list(r) for p, r in sorted(replicas.items()) if r}

    body: dict[str, Any] = {
        "version": 3,
        "partitions": {str(p): list(r) for p, r in sorted(assignment.partitions.items())},
        "adding_replicas": as_json(assignment.adding),
        "removing_replicas": as_json(assignment.removing),
    }
    if assignment.topic_id is not None:
        body["topic_id"] = uuid_to_kafka_str(assignment.topic_id)
    return _dump(body)


def decode_topic(name: str, data: bytes) -> TopicAssignment:
    what = topic_path(name)
    obj = _load_object(data, what)

    def replica_map(key: str) -> dict[int, list[int]]:
        raw = obj.get(key) or {}
        if not isinstance(raw, dict):
            raise ZnodeDecodeError(f"{what}: malformed {key!r}: {raw!r}")
        try:
            return {int(p): _int_list(r, what) for p, r in raw.items()}
        except ValueError as exc:
            raise ZnodeDecodeError(f"{what}: malformed partition index in {key!r}: {raw!r}") from exc

    topic_id = None
    raw_id = obj.get("topic_id")
    if raw_id is not None:
        try:
            topic_id = uuid_from_kafka_str(raw_id)
        except (TypeError, ValueError) as exc:
            raise ZnodeDecodeError(f"{what}: malformed topic_id {raw_id!r}") from exc
    return TopicAssignment(name, topic_id, replica_map("partitions"), replica_map("adding_replicas"),
                           replica_map("removing_replicas"))


# -- /brokers/topics/<t>/partitions/<p>/state -----------------------------------------------------------

@dataclass(slots=True)
class LeaderIsr:
    """A partition's leader, leader epoch and ISR as the controller last wrote them.

    The partition epoch is the znode version and travels next to this record, never inside it.
    `leader_recovery_state` is 1 (RECOVERING) only after an unclean election, else 0 (RECOVERED).
    """

    leader: int
    leader_epoch: int
    isr: list[int]
    controller_epoch: int
    leader_recovery_state: int = 0


def encode_partition_state(state: LeaderIsr) -> bytes:
    body: dict[str, Any] = {"version": 1, "leader": state.leader, "leader_epoch": state.leader_epoch,
                            "controller_epoch": state.controller_epoch, "isr": list(state.isr)}
    # Only a RECOVERING partition carries the key: older brokers would not expect it otherwise.
    if state.leader_recovery_state != 0:
        body["leader_recovery_state"] = state.leader_recovery_state
    return _dump(body)


def decode_partition_state(data: bytes, what: str = "partition state") -> LeaderIsr:
    obj = _load_object(data, what)
    recovery = obj.get("leader_recovery_state", 0)
    if not isinstance(recovery, int) or isinstance(recovery, bool) or recovery not in (0, 1):
        raise ZnodeDecodeError(f"{what}: malformed leader_recovery_state {recovery!r}")
    return LeaderIsr(_int(obj, "leader", what), _int(obj, "leader_epoch", what),
                     _int_list(obj.get("isr"), what), _int(obj, "controller_epoch", what), recovery)


# -- /admin ----------------------------------------------------------------------------------------------

def encode_reassignment(targets: Mapping[tuple[str, int], Iterable[int]]) -> bytes:
    """The legacy /admin/reassign_partitions request, as kafka-reassign-partitions.sh wrote it."""
    return _dump({"version": 1, "partitions": [
        {"topic": topic, "partition": partition, "replicas": list(replicas)}
        for (topic, partition), replicas in sorted(targets.items())]})


def decode_reassignment(data: bytes) -> dict[tuple[str, int], list[int]]:
    obj = _load_object(data, REASSIGN_PARTITIONS_PATH)
    result: dict[tuple[str, int], list[int]] = {}
    for entry in _require(obj, "partitions", list, REASSIGN_PARTITIONS_PATH):
        if not isinstance(entry, dict):
            raise ZnodeDecodeError(f"{REASSIGN_PARTITIONS_PATH}: malformed entry {entry!r}")
        key = (_require(entry, "topic", str, REASSIGN_PARTITIONS_PATH),
               _int(entry, "partition", REASSIGN_PARTITIONS_PATH))
        result[key] = _int_list(entry.get("replicas"), REASSIGN_PARTITIONS_PATH)
    return result


def _encode_partition_list(partitions: Iterable[tuple[str, int]]) -> bytes:
    return _dump({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in sorted(set(partitions))]})


def _decode_partition_list(data: bytes, what: str) -> set[tuple[str, int]]:
    obj = _load_object(data, what)
    result: set[tuple[str, int]] = set()
    for entry in _require(obj, "partitions", list, what):
        if not isinstance(entry, dict):
            raise ZnodeDecodeError(f"{what}: malformed entry {entry!r}")
        result.add((_require(entry, "topic", str, what), _int(entry, "partition", what)))
    return result


def encode_preferred_replica_election(partitions: Iterable[tuple[str, int]]) -> bytes:
    return _encode_partition_list(partitions)


def decode_preferred_replica_election(data: bytes) -> set[tuple[str, int]]:
    return _decode_partition_list(data, PREFERRED_REPLICA_ELECTION_PATH)


# -- notifications (persistent-sequential children) ------------------------------------------------------

def encode_isr_change(partitions: Iterable[tuple[str, int]]) -> bytes:
    return _encode_partition_list(partitions)


def decode_isr_change(data: bytes) -> set[tuple[str, int]]:
    return _decode_partition_list(data, ISR_CHANGE_NOTIFICATION_PATH)


def encode_log_dir_event(broker_id: int) -> bytes:
    return _dump({"version": 1, "broker": broker_id, "event": 1})  # event 1 = log dir failure, the only kind


def decode_log_dir_event(data: bytes) -> int:
    """The broker whose log dir failed."""
    return _int(_load_object(data, LOG_DIR_EVENT_PATH), "broker", LOG_DIR_EVENT_PATH)


# -- /config ---------------------------------------------------------------------------------------------

def encode_config(configs: Mapping[str, str]) -> bytes:
    for key, value in configs.items():
        # Kafka keeps these in java.util.Properties: strings only, and a 3.7 broker fails to read
        # anything else.
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"config {key!r}={value!r}: keys and values must be strings")
    return _dump({"version": 1, "config": dict(configs)})


def decode_config(data: bytes | None) -> dict[str, str]:
    if not data:
        return {}  # Kafka reads an empty or null config znode as no overrides
    obj = _load_object(data, CONFIG_PATH)
    config = obj.get("config") or {}
    if not isinstance(config, dict):
        raise ZnodeDecodeError(f"{CONFIG_PATH}: malformed config {config!r}")
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}


def encode_config_change(entity_path: str) -> bytes:
    """A config_change_ notification naming `<type>/<name>` (sanitized), e.g. "topics/foo"."""
    return _dump({"version": 2, "entity_path": entity_path})


def decode_config_change(data: bytes) -> str:
    """The entity path a notification names; v1 notifications carried type and name separately."""
    obj = _load_object(data, CONFIG_CHANGES_PATH)
    version = _int(obj, "version", CONFIG_CHANGES_PATH)
    if version == 1:
        return (f"{_require(obj, 'entity_type', str, CONFIG_CHANGES_PATH)}/"
                f"{_require(obj, 'entity_name', str, CONFIG_CHANGES_PATH)}")
    if version == 2:
        return _require(obj, "entity_path", str, CONFIG_CHANGES_PATH)
    raise ZnodeDecodeError(f"{CONFIG_CHANGES_PATH}: unsupported notification version {version}")


# -- /latest_producer_id_block ---------------------------------------------------------------------------

@dataclass(slots=True)
class ProducerIdBlock:
    """The last block of producer ids handed out, both ends inclusive."""

    broker_id: int
    first_id: int
    last_id: int

    @property
    def size(self) -> int:
        return self.last_id - self.first_id + 1


def encode_producer_id_block(block: ProducerIdBlock) -> bytes:
    # Start and end are JSON strings in Kafka's format (64-bit ids written through Scala's toString).
    return _dump({"version": 1, "broker": block.broker_id, "block_start": str(block.first_id),
                  "block_end": str(block.last_id)})


def decode_producer_id_block(data: bytes) -> ProducerIdBlock:
    obj = _load_object(data, PRODUCER_ID_BLOCK_PATH)
    what = PRODUCER_ID_BLOCK_PATH
    return ProducerIdBlock(_int(obj, "broker", what), _int(obj, "block_start", what), _int(obj, "block_end", what))


# -- /feature --------------------------------------------------------------------------------------------

@dataclass(slots=True)
class FinalizedFeatures:
    """/feature: whether feature versioning is on (status 1) and the finalized max version levels.

    A 3.7 ZooKeeper-mode cluster keeps `features` empty; finalizing any makes 3.7 brokers exit.
    """

    status: int = 1
    features: dict[str, int] = field(default_factory=dict)
    version: int = 2


def encode_feature(state: FinalizedFeatures) -> bytes:
    features: dict[str, dict[str, int]] = {}
    for name, level in state.features.items():
        # v1 also stored a min level; v2 dropped it, and Kafka writes 1 there when writing v1.
        features[name] = {"max_version_level": level} if state.version >= 2 else \
            {"min_version_level": 1, "max_version_level": level}
    return _dump({"version": state.version, "status": state.status, "features": features})


def decode_feature(data: bytes) -> FinalizedFeatures:
    obj = _load_object(data, FEATURE_PATH)
    version = _int(obj, "version", FEATURE_PATH)
    status = _int(obj, "status", FEATURE_PATH)
    if status not in (0, 1):
        raise ZnodeDecodeError(f"{FEATURE_PATH}: unknown status {status}")
    raw = obj.get("features") or {}
    if not isinstance(raw, dict):
        raise ZnodeDecodeError(f"{FEATURE_PATH}: malformed features {raw!r}")
    features = {}
    for name, levels in raw.items():
        if not isinstance(levels, dict):
            raise ZnodeDecodeError(f"{FEATURE_PATH}: malformed feature {name!r}: {levels!r}")
        features[name] = _int(levels, "max_version_level", FEATURE_PATH)
    return FinalizedFeatures(status, features, version)
