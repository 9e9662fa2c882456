"""A per-version wire differential: the same request bytes to kafkapy and to real Apache Kafka.

For every API key and version that both brokers advertise (each one's ApiVersions), one or more
benign requests are built with kafkapy's generated codecs, sent to both brokers over plain sockets,
and both answers decoded with kafkapy's response codec at that version. The decoded answers are
normalized (node ids, hosts, ports, cluster and topic ids, epochs, timestamps, throttle times and
producer ids become placeholders; lists are ordered; the records of a Fetch become their offsets,
keys and values; DescribeConfigs and CreateTopics keep a few fixed configs; ApiVersions keeps its shape) and
compared field by field. Each answer is also re-encoded with kafkapy's encoder: an answer that does
not re-encode to its own bytes carries something kafkapy's codec does not know (an unknown tagged
field, a non-default written where Kafka writes none).

A difference is (api, version, request label, field path, kafkapy value, Kafka value); the
allowed ones are in wire_known_differences.py, the kafkapy defects there too (the test xfails them).

    python -m conformance.differential.wire_versions --out build/wire-versions.json [--reference NAME]

starts kafkapy and each reference (conformance/real_kafka.py), one JVM at a time, and writes every
comparison and difference as JSON. conformance/differential/test_wire_versions.py is the CI test.
"""
from __future__ import annotations

import argparse
import json
import socket
import struct
import sys
import time
import uuid
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from kafkapy.protocol.headers import decode_response_header, encode_request_header
from kafkapy.protocol.messages import RESPONSE_TYPES
from kafkapy.protocol.primitives import asdict

__all__ = ["Answer", "Difference", "SetupError", "WireClient", "collect", "compare", "prepare_broker",
           "run_against", "FIXED_TOPIC_CONFIGS", "FIXED_BROKER_CONFIGS"]

HOST = "127.0.0.1"
TOPIC = "wire"
SECRET_TOPIC = "wire-secret"        # only User:alice may use it (an ACL) where the authorizer is on
GROUP = "wire-group"                 # a committed offset, no members
SECRET_GROUP = "wire-secret-group"
TXN_ID = "wire-txn"                  # one committed transaction
UNKNOWN_TOPIC = "wire-no-such-topic"
UNKNOWN_GROUP = "wire-no-such-group"
RECORDS_PER_PARTITION = 3
COMMITTED_OFFSET = 2

# A few configs whose value and source must agree (the full set of names differs between versions).
FIXED_TOPIC_CONFIGS = ("cleanup.policy", "retention.ms", "segment.bytes", "max.message.bytes",
                       "compression.type", "min.insync.replicas", "unclean.leader.election.enable")
FIXED_BROKER_CONFIGS = ("num.partitions", "auto.create.topics.enable", "default.replication.factor",
                        "log.retention.hours", "message.max.bytes", "offsets.topic.replication.factor")

_SIZE = struct.Struct(">i")


class SetupError(RuntimeError):
    """A broker could not be given the topic, records, group, transaction or ACL the requests read."""


# -- the wire client -----------------------------------------------------------------------------------

@dataclass(slots=True)
class Answer:
    """One request's outcome on one broker: the decoded answer, or why there is none."""

    decoded: dict | None = None
    error: str | None = None           # "disconnected", "timeout", "decode: ..."
    reencodes_exactly: bool | None = None
    size: int = 0


class WireClient:
    """A blocking socket to one broker: a request encoded at one version, its raw answer decoded."""

    def __init__(self, bootstrap: str, timeout_s: float = 10.0, client_id: str = "wire-versions"):
        host, _, port = bootstrap.rpartition(":")
        self.address = (host, int(port))
        self.timeout_s = timeout_s
        self.client_id = client_id
        self._correlation = 0
        self.sock: socket.socket | None = None

    def _connect(self) -> socket.socket:
        if self.sock is None:
            self.sock = socket.create_connection(self.address, timeout=self.timeout_s)
        return self.sock

    def close(self) -> None:
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
            self.sock = None

    def _read(self, n: int) -> bytes:
        assert self.sock is not None
        chunks = []
        while n:
            chunk = self.sock.recv(min(n, 1 << 20))
            if not chunk:
                raise ConnectionResetError("the broker closed the connection")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def exchange(self, request: Any, version: int) -> Answer:
        """Send `request` at `version`; a broker that closes the connection gives error 'disconnected'."""
        api_key = request.API_KEY
        self._correlation += 1
        payload = b"".join([encode_request_header(api_key, version, self._correlation, self.client_id),
                            *request.encode_parts(version)])
        try:
            sock = self._connect()
            sock.sendall(_SIZE.pack(len(payload)) + payload)
            size = _SIZE.unpack(self._read(4))[0]
            frame = self._read(size)
        except (socket.timeout, TimeoutError):
            self.close()
            return Answer(error="timeout")
        except OSError:
            self.close()
            return Answer(error="disconnected")
        response_type = RESPONSE_TYPES[api_key]
        try:
            correlation, pos = decode_response_header(frame, api_key, version)
            if correlation != self._correlation:
                self.close()
                return Answer(error=f"correlation id {correlation}, expected {self._correlation}")
            response = response_type.decode(frame, version, pos)
        except Exception as exc:  # noqa: BLE001 - an undecodable answer is the finding itself
            return Answer(error=f"decode: {exc}", size=len(frame))
        try:
            exact = response.encode(version) == bytes(frame[pos:])
        except Exception:  # noqa: BLE001 - an answer kafkapy's encoder rejects does not re-encode
            exact = False
        return Answer(decoded=asdict(response), reencodes_exactly=exact, size=len(frame))

    def send(self, request: Any, version: int) -> dict:
        """The decoded answer, or SetupError."""
        answer = self.exchange(request, version)
        if answer.decoded is None:
            raise SetupError(f"{type(request).__name__} v{version} to {self.address}: {answer.error}")
        return answer.decoded

    def api_versions(self) -> dict[int, tuple[int, int]]:
        from kafkapy.protocol.messages import ApiVersionsRequest

        decoded = self.send(ApiVersionsRequest(client_software_name="wire-versions", client_software_version="1"), 3)
        return {k["api_key"]: (k["min_version"], k["max_version"]) for k in decoded["api_keys"]}


# -- broker set-up ---------------------------------------------------------------------------------------

def prepare_broker(bootstrap: str, authorizer: bool, timeout_s: float = 30.0) -> dict:
    """Topics `wire` (2 partitions, records) and `wire-secret`, a committed offset, a transaction, ACLs.

    Done the same way on every broker with confluent-kafka (librdkafka). Returns the context the
    requests need: the topic ids by name.
    """
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )

    base = {"bootstrap.servers": bootstrap, "log_level": 3}
    admin = AdminClient(base)
    try:
        futures = admin.create_topics([NewTopic(TOPIC, 2, 1), NewTopic(SECRET_TOPIC, 1, 1)],
                                      operation_timeout=timeout_s, request_timeout=timeout_s)
        for future in futures.values():
            future.result(timeout_s)
        _wait_for_leaders(bootstrap, timeout_s)
        producer = Producer({**base, "linger.ms": 0, "enable.idempotence": False, "acks": "all"})
        for partition in (0, 1):
            for i in range(RECORDS_PER_PARTITION):
                producer.produce(TOPIC, key=f"k{partition}-{i}".encode(), value=f"v{partition}-{i}".encode(),
                                 partition=partition, timestamp=1_700_000_000_000 + i)
                producer.flush(timeout_s)  # one batch per record: the same batch layout on every broker
        if producer.flush(timeout_s):
            raise SetupError(f"records not delivered to {bootstrap}")
        txn = Producer({**base, "transactional.id": TXN_ID, "linger.ms": 0})
        txn.init_transactions(timeout_s)
        txn.begin_transaction()
        txn.produce(SECRET_TOPIC, key=b"t", value=b"txn")
        txn.commit_transaction(timeout_s)
        consumer = Consumer({**base, "group.id": GROUP, "enable.auto.commit": False})
        try:
            consumer.commit(offsets=[TopicPartition(TOPIC, 0, COMMITTED_OFFSET)], asynchronous=False)
        finally:
            consumer.close()
        if authorizer:
            alice_only = [AclBinding(kind, name, ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.ALL,
                                     AclPermissionType.ALLOW)
                          for kind, name in ((ResourceType.TOPIC, SECRET_TOPIC), (ResourceType.GROUP, SECRET_GROUP))]
            for future in admin.create_acls(alice_only, request_timeout=timeout_s).values():
                future.result(timeout_s)
    except KafkaException as exc:
        raise SetupError(f"setting up {bootstrap}: {exc}") from None
    return {"topic_ids": _topic_ids(bootstrap, timeout_s)}


def _metadata(bootstrap: str) -> dict:
    from kafkapy.protocol.messages import MetadataRequest

    client = WireClient(bootstrap)
    try:
        return client.send(MetadataRequest(topics=None), 12)
    finally:
        client.close()


def _wait_for_leaders(bootstrap: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        topics = {t["name"]: t for t in _metadata(bootstrap)["topics"]}
        ready = all(name in topics and topics[name]["partitions"]
                    and all(p["leader_id"] >= 0 for p in topics[name]["partitions"]) for name in (TOPIC, SECRET_TOPIC))
        if ready:
            return
        if time.monotonic() > deadline:
            raise SetupError(f"topics on {bootstrap} have no leaders after {timeout_s:.0f} s")
        time.sleep(0.2)


def _topic_ids(bootstrap: str, timeout_s: float) -> dict[str, uuid.UUID]:
    return {t["name"]: t["topic_id"] for t in _metadata(bootstrap)["topics"]}


# -- the requests ----------------------------------------------------------------------------------------

Requests = Callable[[int, dict], list[tuple[str, Any]]]
REQUESTS: dict[str, Requests] = {}


def _requests(name: str) -> Callable[[Requests], Requests]:
    def register(fn: Requests) -> Requests:
        REQUESTS[name] = fn
        return fn
    return register


def _m(name: str):
    import kafkapy.protocol.messages as messages

    return getattr(messages, name)


@_requests("ApiVersions")
def _api_versions(v: int, ctx: dict) -> list:
    return [("plain", _m("ApiVersionsRequest")(client_software_name="wire-versions", client_software_version="1.0"))]


@_requests("Metadata")
def _metadata_requests(v: int, ctx: dict) -> list:
    req, topic = _m("MetadataRequest"), _m("MetadataRequest").MetadataRequestTopic
    out = [("one-topic", req(topics=[topic(name=TOPIC)], allow_auto_topic_creation=False,
                             include_topic_authorized_operations=v >= 8)),
           ("unknown-topic", req(topics=[topic(name=UNKNOWN_TOPIC)], allow_auto_topic_creation=False)),
           ("secret-topic", req(topics=[topic(name=SECRET_TOPIC)], allow_auto_topic_creation=False))]
    if v >= 1:  # v0's empty list means "all topics"; null means all from v1
        out.append(("all-topics", req(topics=None, allow_auto_topic_creation=False)))
        out.append(("no-topics", req(topics=[], allow_auto_topic_creation=False)))
    if 8 <= v <= 10:
        out.append(("cluster-ops", req(topics=[], include_cluster_authorized_operations=True)))
    if v >= 10:
        out.append(("by-topic-id", req(topics=[topic(topic_id=ctx["topic_ids"][TOPIC], name=None)])))
        out.append(("unknown-topic-id", req(topics=[topic(topic_id=uuid.UUID(int=7), name=None)])))
    return out


@_requests("DescribeCluster")
def _describe_cluster(v: int, ctx: dict) -> list:
    req = _m("DescribeClusterRequest")
    out = [("plain", req(include_cluster_authorized_operations=True))]
    if v >= 1:
        out.append(("controllers", req(endpoint_type=2)))
    return out


@_requests("FindCoordinator")
def _find_coordinator(v: int, ctx: dict) -> list:
    req = _m("FindCoordinatorRequest")
    if v <= 3:
        out = [("group", req(key=GROUP, key_type=0))]
        if v >= 1:
            out.append(("transaction", req(key=TXN_ID, key_type=1)))
            out.append(("secret-group", req(key=SECRET_GROUP, key_type=0)))
        return out
    return [("group", req(key_type=0, coordinator_keys=[GROUP, UNKNOWN_GROUP])),
            ("transaction", req(key_type=1, coordinator_keys=[TXN_ID])),
            ("secret-group", req(key_type=0, coordinator_keys=[SECRET_GROUP]))]


@_requests("ListOffsets")
def _list_offsets(v: int, ctx: dict) -> list:
    req = _m("ListOffsetsRequest")
    topic, part = req.ListOffsetsTopic, req.ListOffsetsPartition

    def one(name: str, timestamps: list[tuple[int, int]]) -> Any:
        return req(replica_id=-1, isolation_level=0, topics=[topic(name=name, partitions=[
            part(partition_index=p, current_leader_epoch=-1, timestamp=ts, max_num_offsets=1) for p, ts in timestamps])])

    out = [("latest-earliest", one(TOPIC, [(0, -1), (1, -2)])),
           ("by-time", one(TOPIC, [(0, 1_700_000_000_001), (1, 1_800_000_000_000)])),
           ("unknown-topic", one(UNKNOWN_TOPIC, [(0, -1)])),
           ("unknown-partition", one(TOPIC, [(5, -1)])),
           ("secret-topic", one(SECRET_TOPIC, [(0, -1)]))]
    if v >= 7:
        out.append(("max-timestamp", one(TOPIC, [(0, -3)])))
    return out


@_requests("Fetch")
def _fetch(v: int, ctx: dict) -> list:
    req = _m("FetchRequest")
    topic, part = req.FetchTopic, req.FetchPartition

    def one(name: str, partitions: list[int], max_bytes: int = 1 << 20, offset: int = 0) -> Any:
        return req(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=max_bytes, isolation_level=0,
                   session_id=0, session_epoch=-1,
                   topics=[topic(topic=name, topic_id=ctx["topic_ids"].get(name, uuid.UUID(int=9)), partitions=[
                       part(partition=p, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
                            log_start_offset=-1, partition_max_bytes=max_bytes) for p in partitions])])

    return [("from-0", one(TOPIC, [0, 1])),
            ("small-max-bytes", one(TOPIC, [0], max_bytes=10)),
            ("out-of-range", one(TOPIC, [0], offset=100)),
            ("unknown-topic", one(UNKNOWN_TOPIC, [0])),
            ("secret-topic", one(SECRET_TOPIC, [0]))]


@_requests("OffsetFetch")
def _offset_fetch(v: int, ctx: dict) -> list:
    req = _m("OffsetFetchRequest")
    if v <= 7:
        t = req.OffsetFetchRequestTopic
        out = [("group-topic", req(group_id=GROUP, topics=[t(name=TOPIC, partition_indexes=[0, 1])])),
               ("unknown-group", req(group_id=UNKNOWN_GROUP, topics=[t(name=TOPIC, partition_indexes=[0])])),
               ("unknown-topic", req(group_id=GROUP, topics=[t(name=UNKNOWN_TOPIC, partition_indexes=[0])])),
               ("secret-group", req(group_id=SECRET_GROUP, topics=[t(name=TOPIC, partition_indexes=[0])]))]
        if v >= 2:
            out.append(("all-topics", req(group_id=GROUP, topics=None)))
        return out
    g, t = req.OffsetFetchRequestGroup, req.OffsetFetchRequestTopics
    return [("group-topic", req(groups=[g(group_id=GROUP, member_id=None, member_epoch=-1,
                                           topics=[t(name=TOPIC, partition_indexes=[0, 1])])])),
            ("all-topics", req(groups=[g(group_id=GROUP, member_id=None, member_epoch=-1, topics=None)])),
            ("unknown-group", req(groups=[g(group_id=UNKNOWN_GROUP, member_id=None, member_epoch=-1, topics=None)])),
            ("secret-group", req(groups=[g(group_id=SECRET_GROUP, member_id=None, member_epoch=-1, topics=None)]))]


@_requests("DescribeGroups")
def _describe_groups(v: int, ctx: dict) -> list:
    req = _m("DescribeGroupsRequest")
    return [("known-and-unknown", req(groups=[GROUP, UNKNOWN_GROUP], include_authorized_operations=v >= 3)),
            ("secret-group", req(groups=[SECRET_GROUP]))]


@_requests("ListGroups")
def _list_groups(v: int, ctx: dict) -> list:
    req = _m("ListGroupsRequest")
    out = [("plain", req())]
    if v >= 4:
        out.append(("state-empty", req(states_filter=["Empty"])))
        out.append(("state-stable", req(states_filter=["Stable"])))
    if v >= 5:
        out.append(("type-classic", req(types_filter=["classic"])))
        out.append(("type-consumer", req(types_filter=["consumer"])))
    return out


@_requests("DescribeConfigs")
def _describe_configs(v: int, ctx: dict) -> list:
    req = _m("DescribeConfigsRequest")
    res = req.DescribeConfigsResource
    return [("topic", req(resources=[res(resource_type=2, resource_name=TOPIC, configuration_keys=None)],
                          include_synonyms=v >= 1)),
            ("broker", req(resources=[res(resource_type=4, resource_name="1", configuration_keys=None)])),
            ("topic-keys", req(resources=[res(resource_type=2, resource_name=TOPIC,
                                              configuration_keys=["cleanup.policy", "no.such.config"])],
                               include_documentation=v >= 3)),
            ("unknown-topic", req(resources=[res(resource_type=2, resource_name=UNKNOWN_TOPIC,
                                                 configuration_keys=None)])),
            ("secret-topic", req(resources=[res(resource_type=2, resource_name=SECRET_TOPIC,
                                                configuration_keys=["cleanup.policy"])])),
            ("other-broker", req(resources=[res(resource_type=4, resource_name="7", configuration_keys=None)]))]


@_requests("DescribeAcls")
def _describe_acls(v: int, ctx: dict) -> list:
    req = _m("DescribeAclsRequest")
    return [("any", req(resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                        principal_filter=None, host_filter=None, operation=1, permission_type=1)),
            ("topic-literal", req(resource_type_filter=2, resource_name_filter=SECRET_TOPIC, pattern_type_filter=3,
                                  principal_filter=None, host_filter=None, operation=1, permission_type=1))]


@_requests("DescribeLogDirs")
def _describe_log_dirs(v: int, ctx: dict) -> list:
    req = _m("DescribeLogDirsRequest")
    return [("topic", req(topics=[req.DescribableLogDirTopic(topic=TOPIC, partitions=[0, 1])])),
            ("unknown-topic", req(topics=[req.DescribableLogDirTopic(topic=UNKNOWN_TOPIC, partitions=[0])]))]


@_requests("DescribeProducers")
def _describe_producers(v: int, ctx: dict) -> list:
    req = _m("DescribeProducersRequest")
    return [("topics", req(topics=[req.TopicRequest(name=TOPIC, partition_indexes=[0, 7]),
                                   req.TopicRequest(name=UNKNOWN_TOPIC, partition_indexes=[0])])),
            ("secret-topic", req(topics=[req.TopicRequest(name=SECRET_TOPIC, partition_indexes=[0])]))]


@_requests("DescribeTransactions")
def _describe_transactions(v: int, ctx: dict) -> list:
    return [("known-and-unknown", _m("DescribeTransactionsRequest")(transactional_ids=[TXN_ID, "wire-no-such-txn"]))]


@_requests("ListTransactions")
def _list_transactions(v: int, ctx: dict) -> list:
    req = _m("ListTransactionsRequest")
    out = [("plain", req()), ("state-ongoing", req(state_filters=["Ongoing"])),
           ("state-unknown", req(state_filters=["NoSuchState"]))]
    if v >= 1:
        out.append(("duration", req(duration_filter=3_600_000)))
    return out


@_requests("DescribeClientQuotas")
def _describe_client_quotas(v: int, ctx: dict) -> list:
    req = _m("DescribeClientQuotasRequest")
    comp = req.ComponentData
    return [("any-user", req(components=[comp(entity_type="user", match_type=2, match=None)], strict=False)),
            ("bad-entity", req(components=[comp(entity_type="no-such-entity", match_type=2, match=None)]))]


@_requests("DescribeUserScramCredentials")
def _describe_scram(v: int, ctx: dict) -> list:
    req = _m("DescribeUserScramCredentialsRequest")
    return [("all", req(users=None)), ("unknown-user", req(users=[req.UserName(name="nobody")]))]


@_requests("DescribeTopicPartitions")
def _describe_topic_partitions(v: int, ctx: dict) -> list:
    req = _m("DescribeTopicPartitionsRequest")
    return [("topics", req(topics=[req.TopicRequest(name=TOPIC), req.TopicRequest(name=UNKNOWN_TOPIC)],
                           response_partition_limit=2000)),
            ("limit-1", req(topics=[req.TopicRequest(name=TOPIC)], response_partition_limit=1)),
            ("secret-topic", req(topics=[req.TopicRequest(name=SECRET_TOPIC)], response_partition_limit=10))]


@_requests("ConsumerGroupDescribe")
def _consumer_group_describe(v: int, ctx: dict) -> list:
    req = _m("ConsumerGroupDescribeRequest")
    return [("classic-and-unknown", req(group_ids=[GROUP, UNKNOWN_GROUP], include_authorized_operations=True)),
            ("secret-group", req(group_ids=[SECRET_GROUP]))]


@_requests("ShareGroupDescribe")
def _share_group_describe(v: int, ctx: dict) -> list:
    req = _m("ShareGroupDescribeRequest")
    return [("classic-and-unknown", req(group_ids=[GROUP, UNKNOWN_GROUP], include_authorized_operations=True))]


@_requests("CreateTopics")
def _create_topics(v: int, ctx: dict) -> list:
    req = _m("CreateTopicsRequest")
    topic = req.CreatableTopic
    out = [("existing", req(topics=[topic(name=TOPIC, num_partitions=1, replication_factor=1)], timeout_ms=5000))]
    if v >= 1:
        out += [("validate-only", req(topics=[topic(name="wire-validate", num_partitions=3, replication_factor=1)],
                                      timeout_ms=5000, validate_only=True)),
                ("validate-bad-config", req(topics=[topic(name="wire-validate", num_partitions=1, replication_factor=1,
                                                          configs=[req.CreatableTopicConfig(name="cleanup.policy",
                                                                                            value="bogus")])],
                                            timeout_ms=5000, validate_only=True)),
                ("validate-rf-too-big", req(topics=[topic(name="wire-validate", num_partitions=1, replication_factor=3)],
                                            timeout_ms=5000, validate_only=True)),
                ("validate-bad-name", req(topics=[topic(name="bad name!", num_partitions=1, replication_factor=1)],
                                          timeout_ms=5000, validate_only=True))]
    return out


# -- normalization ---------------------------------------------------------------------------------------

# Field names whose values legitimately differ between two brokers; a set value becomes a placeholder
# (unset ones, -1/None/"", stay as they are: set-or-not is part of the shape).
_PLACEHOLDERS = {
    "cluster_id": "<cluster>", "node_id": "<node>", "leader_id": "<node>", "controller_id": "<node>",
    "broker_id": "<node>", "host": "<host>", "port": "<port>", "topic_id": "<topic-id>",
    "leader_epoch": "<epoch>", "partition_leader_epoch": "<epoch>", "current_leader_epoch": "<epoch>",
    "producer_id": "<pid>", "producer_epoch": "<epoch>", "coordinator_epoch": "<epoch>",
    "last_timestamp": "<time>", "transaction_start_time_ms": "<time>", "current_txn_start_offset": "<offset>",
    "timestamp": "<time>", "session_id": "<session>", "log_dir": "<dir>", "total_bytes": "<bytes>",
    "usable_bytes": "<bytes>", "size": "<bytes>", "offset_lag": "<lag>", "finalized_features_epoch": "<epoch>",
    "member_id": "<member>", "client_host": "<host>",
}
_NODE_LISTS = ("replica_nodes", "isr_nodes", "offline_replicas", "eligible_leader_replicas", "last_known_elr")
_DROPPED = ("throttle_time_ms",)


def _is_unset(value: Any) -> bool:
    return value is None or value == "" or (isinstance(value, int) and not isinstance(value, bool) and value < 0) \
        or value == uuid.UUID(int=0)


def _plain(value: Any) -> Any:
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    return value


def _normalize(value: Any) -> Any:
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key in _DROPPED:
                continue
            if key in _PLACEHOLDERS and not isinstance(item, (dict, list)):
                out[key] = _plain(item) if _is_unset(item) else _PLACEHOLDERS[key]
            elif key in _NODE_LISTS and isinstance(item, list):
                out[key] = ["<node>" if isinstance(n, int) and n >= 0 else n for n in item]
            elif key == "records" and item is not None:
                out[key] = _records(item)
            else:
                out[key] = _normalize(item)
        return out
    if isinstance(value, list):
        items = [_normalize(item) for item in value]
        if items and all(isinstance(item, dict) for item in items):
            items.sort(key=lambda item: json.dumps(item, sort_keys=True, default=str))
        return items
    return _plain(value)


def _records(raw: Any) -> Any:
    """A Fetch partition's records as [offset, key, value, magic] lists; a partial batch at the end dropped."""
    from kafkapy.protocol.legacy_records import iter_legacy_records
    from kafkapy.protocol.records import iter_batch_headers, iter_records, read_magic

    data = bytes(raw.tobytes() if hasattr(raw, "tobytes") else raw)
    if not data:
        return []
    out: list = []
    try:
        magic = read_magic(data, 0) if len(data) > 17 else None
        if magic == 2:
            pos = 0
            for header in iter_batch_headers(_whole_batches(data), validate=True):
                batch = data[pos:pos + header.size]
                out += [[r.offset, _plain(r.key), _plain(r.value), 2] for r in iter_records(batch, header)]
                pos += header.size
        elif magic in (0, 1):
            out += [[m.offset, _plain(m.key), _plain(m.value), m.magic]
                    for m in iter_legacy_records(_whole_messages(data))]
        else:
            out.append(f"<{len(data)} bytes, partial>")
    except Exception as exc:  # noqa: BLE001 - records kafkapy cannot read are a finding
        out.append(f"<undecodable: {exc}>")
    return out


def _whole_batches(data: bytes) -> bytes:
    pos = 0
    while pos + 12 <= len(data):
        size = struct.unpack_from(">i", data, pos + 8)[0] + 12
        if pos + size > len(data):
            break
        pos += size
    return data[:pos]


def _whole_messages(data: bytes) -> bytes:
    pos = 0
    while pos + 12 <= len(data):
        size = struct.unpack_from(">i", data, pos + 8)[0] + 12
        if pos + size > len(data):
            break
        pos += size
    return data[:pos]


def _shape_api_versions(version: int, decoded: dict) -> dict:
    """ApiVersions compared by shape: which features appear and whether their ranges suit the version."""
    features = decoded.get("supported_features") or []
    return {
        "error_code": decoded["error_code"],
        "api_keys_nonempty": bool(decoded["api_keys"]),
        "api_keys_min_versions_valid": all(0 <= k["min_version"] <= k["max_version"] for k in decoded["api_keys"]),
        "supported_feature_names": sorted(f["name"] for f in features),
        # KAFKA-17492: a client below v4 cannot read a supported feature whose min version is 0
        "supported_feature_min_version_0": sorted(f["name"] for f in features if f["min_version"] == 0),
        "finalized_feature_names": sorted(f["name"] for f in decoded.get("finalized_features") or []),
        "finalized_features_epoch_set": decoded.get("finalized_features_epoch", -1) >= 0,
        "zk_migration_ready": decoded.get("zk_migration_ready", False),
    }


def _shape_describe_configs(version: int, decoded: dict) -> dict:
    results = []
    for result in decoded["results"]:
        configs = {c["name"]: c for c in result["configs"]}
        fixed = FIXED_TOPIC_CONFIGS if result["resource_type"] == 2 else FIXED_BROKER_CONFIGS
        kept = {}
        for name in fixed:
            c = configs.get(name)
            if c is not None:
                kept[name] = {
                    "value": c["value"], "read_only": c["read_only"], "config_source": c.get("config_source"),
                    "is_default": c.get("is_default"), "is_sensitive": c["is_sensitive"],
                    "config_type": c.get("config_type"), "documentation_set": c.get("documentation") is not None,
                    "synonym_sources": sorted(s["source"] for s in c.get("synonyms") or []),
                }
        results.append({
            "error_code": result["error_code"], "error_message": result["error_message"],
            "resource_type": result["resource_type"], "resource_name": result["resource_name"],
            "has_configs": bool(configs), "fixed_configs": kept,
            "requested_names_only": sorted(configs) if len(configs) <= 3 else None,
        })
    return {"results": sorted(results, key=lambda r: json.dumps(r, sort_keys=True, default=str))}


def _shape_create_topics(version: int, decoded: dict) -> dict:
    """A created (or validated) topic's configs as DescribeConfigs': the fixed ones (the full set of names
    differs between versions, and kafkapy adds its own)."""
    topics = []
    for topic in decoded["topics"]:
        topic = dict(topic)
        configs = topic.pop("configs", None)
        if configs is not None:
            named = {c["name"]: c for c in configs}
            topic["has_configs"] = bool(named)
            topic["fixed_configs"] = {name: {k: v for k, v in named[name].items() if k != "name"}
                                      for name in FIXED_TOPIC_CONFIGS if name in named}
        topics.append(topic)
    return {**decoded, "topics": topics}


_SHAPES: dict[str, Callable[[int, dict], dict]] = {
    "ApiVersions": _shape_api_versions,
    "CreateTopics": _shape_create_topics,
    "DescribeConfigs": _shape_describe_configs,
}


def normalize(api: str, version: int, decoded: dict) -> dict:
    shape = _SHAPES.get(api)
    return _normalize(shape(version, decoded) if shape else decoded)


# -- collection and comparison ---------------------------------------------------------------------------

@dataclass(slots=True)
class Difference:
    """One field of one answer that differs between kafkapy and the reference."""

    reference: str
    api: str
    version: int
    label: str
    path: str
    kafkapy: Any
    kafka: Any

    def key(self) -> tuple:
        return (self.reference, self.api, self.version, self.label, self.path)

    def as_dict(self) -> dict:
        return {"reference": self.reference, "api": self.api, "version": self.version, "label": self.label,
                "path": self.path, "kafkapy": self.kafkapy, "kafka": self.kafka}

    def __str__(self) -> str:
        return (f"{self.api} v{self.version} [{self.label}] {self.path}: kafkapy={json.dumps(self.kafkapy, default=str)} "
                f"kafka={json.dumps(self.kafka, default=str)}")


def _api_names() -> dict[int, str]:
    names = {}
    for name in REQUESTS:
        names[_m(f"{name}Request").API_KEY] = name
    return names


def common_versions(ours: dict[int, tuple[int, int]], theirs: dict[int, tuple[int, int]]) -> dict[str, list[int]]:
    """api name -> the versions both brokers advertise and kafkapy's codecs know, for the APIs covered here."""
    out = {}
    for key, name in _api_names().items():
        if key not in ours or key not in theirs:
            continue
        codec_min, codec_max = _m(f"{name}Request").VALID_VERSIONS
        low = max(ours[key][0], theirs[key][0], codec_min)
        high = min(ours[key][1], theirs[key][1], codec_max)
        if low <= high:
            out[name] = list(range(low, high + 1))
    return out


def collect(bootstrap: str, versions: dict[str, list[int]], ctx: dict) -> dict[tuple[str, int, str], Answer]:
    """Every request of every version in `versions` sent to one broker, over one connection (reopened
    after a broker closes it)."""
    client = WireClient(bootstrap)
    answers = {}
    try:
        for api, vs in versions.items():
            for version in vs:
                for label, request in REQUESTS[api](version, ctx):
                    answers[(api, version, label)] = client.exchange(request, version)
    finally:
        client.close()
    return answers


def _diff(path: str, a: Any, b: Any, out: list[tuple[str, Any, Any]]) -> None:
    if a == b:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for key in list(a) + [k for k in b if k not in a]:
            _diff(f"{path}.{key}" if path else key, a.get(key, "<absent>"), b.get(key, "<absent>"), out)
        return
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            _diff(f"{path}[{i}]", x, y, out)
        return
    out.append((path, a, b))


def compare(reference: str, ours: dict, theirs: dict) -> tuple[list[Difference], int]:
    """Differences between two collect() results (same keys), and how many answers were compared."""
    diffs: list[Difference] = []
    compared = 0
    for key in ours:
        api, version, label = key
        mine, other = ours[key], theirs.get(key)
        if other is None:
            continue
        compared += 1
        a = {"error": mine.error} if mine.decoded is None else normalize(api, version, mine.decoded)
        b = {"error": other.error} if other.decoded is None else normalize(api, version, other.decoded)
        if mine.decoded is not None and other.decoded is not None:
            a["<reencodes exactly>"], b["<reencodes exactly>"] = mine.reencodes_exactly, other.reencodes_exactly
        found: list[tuple[str, Any, Any]] = []
        _diff("", a, b, found)
        diffs += [Difference(reference, api, version, label, path, x, y) for path, x, y in found]
    return diffs, compared


def invariant_violations(reference: str, ours: dict) -> list[Difference]:
    """kafkapy's answers checked on their own: what no client of that version can read."""
    out = []
    for (api, version, label), answer in ours.items():
        if api == "ApiVersions" and answer.decoded is not None and version < 4:
            zero = [f["name"] for f in answer.decoded.get("supported_features") or [] if f["min_version"] < 1]
            if zero:
                out.append(Difference(reference, api, version, label, "<invariant> supported feature min_version >= 1",
                                      zero, []))
    return out


@dataclass(slots=True)
class Run:
    """One reference's comparison with kafkapy."""

    reference: str
    versions: dict[str, list[int]] = field(default_factory=dict)
    compared: int = 0
    differences: list[Difference] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    # answers that do not re-encode to their own bytes with kafkapy's codec, by broker ("kafkapy", "kafka")
    not_reencoded: dict[str, list[str]] = field(default_factory=dict)


def run_against(kafkapy_bootstrap: str, kafkapy_ctx: dict, reference: str, reference_bootstrap: str,
                reference_ctx: dict) -> Run:
    """Compare kafkapy with one prepared reference broker."""
    run = Run(reference)
    begin = time.monotonic()
    ours_versions = WireClient(kafkapy_bootstrap)
    theirs_versions = WireClient(reference_bootstrap)
    try:
        run.versions = common_versions(ours_versions.api_versions(), theirs_versions.api_versions())
    finally:
        ours_versions.close()
        theirs_versions.close()
    ours = collect(kafkapy_bootstrap, run.versions, kafkapy_ctx)
    theirs = collect(reference_bootstrap, run.versions, reference_ctx)
    run.seconds["exchange"] = time.monotonic() - begin
    run.differences, run.compared = compare(reference, ours, theirs)
    for side, answers in (("kafkapy", ours), ("kafka", theirs)):
        run.not_reencoded[side] = [f"{api} v{version} [{label}]" for (api, version, label), answer in answers.items()
                                   if answer.reencodes_exactly is False]
    run.differences += invariant_violations(reference, ours)
    return run


# -- script mode -----------------------------------------------------------------------------------------

def _brokers(work_dir: Path, references: list[str], stack: ExitStack) -> Iterator[tuple[str, str, dict]]:
    from conformance.differential.runner import reference_broker

    for name in references:
        begin = time.monotonic()
        with reference_broker(name, work_dir / name, {}) as real:
            started = time.monotonic() - begin
            ctx = prepare_broker(real.bootstrap, authorizer=True)
            ctx["started_s"] = started
            yield name, real.bootstrap, ctx


def main(argv: list[str] | None = None) -> int:
    import tempfile

    from conformance.differential.runner import kafkapy_target
    from conformance.differential.wire_known_differences import classify

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("build/wire-versions.json"))
    parser.add_argument("--reference", action="append", help="a conformance.real_kafka REFERENCES name (repeatable)")
    args = parser.parse_args(argv)
    references = args.reference or ["kafka-4.4.0-kraft", "kafka-3.9.1-zk"]
    work_dir = Path(tempfile.mkdtemp(prefix="wire-versions-"))
    report: dict = {"references": {}, "work_dir": str(work_dir)}
    unexplained = 0
    with ExitStack() as stack:
        kafkapy = stack.enter_context(kafkapy_target(work_dir / "kafkapy", {}))
        kafkapy_ctx = prepare_broker(kafkapy.bootstrap, authorizer=True)
        for name, bootstrap, ctx in _brokers(work_dir, references, stack):
            run = run_against(kafkapy.bootstrap, kafkapy_ctx, name, bootstrap, ctx)
            rows = []
            for diff in run.differences:
                kind, reason = classify(diff)
                unexplained += kind == "unexplained"
                rows.append({**diff.as_dict(), "kind": kind, "reason": reason})
            report["references"][name] = {"versions": run.versions, "answers_compared": run.compared,
                                          "reference_start_s": round(ctx["started_s"], 1),
                                          "exchange_s": round(run.seconds["exchange"], 1),
                                          "not_reencoded": run.not_reencoded, "differences": rows}
            counts: dict[str, int] = {}
            for row in rows:
                counts[row["kind"]] = counts.get(row["kind"], 0) + 1
            print(f"{name}: {run.compared} answers compared, {len(rows)} differences {counts}; answers not "
                  f"re-encoding exactly: {run.not_reencoded}", flush=True)
            for row in rows:
                if row["kind"] != "accepted":
                    print(f"  {row['kind']}: {row['api']} v{row['version']} [{row['label']}] {row['path']}: "
                          f"kafkapy={json.dumps(row['kafkapy'], default=str)} kafka={json.dumps(row['kafka'], default=str)}",
                          flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1, sort_keys=True, default=str))
    print(f"wrote {args.out}")
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
