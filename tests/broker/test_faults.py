"""Fault injection's pieces without sockets: the error-response builder for every API the broker
serves, rule matching (api, version, client id, topic, partition), count, probability, expiry,
removal, delay, drop, disconnect, latency and the recorder (kafkapy/broker/faults.py)."""
from __future__ import annotations

import asyncio
import random
import time
import uuid
from types import SimpleNamespace

import pytest

import kafkapy.broker.handlers  # noqa: F401  (registers every handler: the APIs a broker serves)
from kafkapy.broker.dispatch import HANDLERS, ConnectionClosed, RequestContext
from kafkapy.broker.faults import (
    DROP, FaultInjector, api_key_of, api_name_of, error_code_of, error_response, request_partitions, to_json)
from kafkapy.protocol.api_versions import SUPPORTED_VERSIONS
from kafkapy.protocol.error_codes import ErrorCode
from kafkapy.protocol.messages import (
    REQUEST_TYPES, RESPONSE_TYPES, AddPartitionsToTxnRequest, DeleteTopicsRequest, FetchRequest,
    FindCoordinatorRequest, MetadataRequest, OffsetFetchRequest, ProduceRequest)
from kafkapy.protocol.primitives import GeneratedStruct

pytestmark = pytest.mark.timeout(60)

NOT_LEADER = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
ERROR_FIELDS = ("error_code", "partition_error_code")


# -- helpers --------------------------------------------------------------------------------------
def sample(cls: type, version: int, depth: int = 0) -> GeneratedStruct:
    """A request of `cls` valid at `version` with two elements in every array (names t0, t1; partitions 0, 1)."""
    obj = cls()
    for f in cls.SCHEMA:
        if not f.present(version):
            continue
        if f.is_array:
            if f.type == "struct":
                value = [sample(f.struct, version, depth + 1) for _ in range(2)] if depth < 4 else []
                for i, item in enumerate(value):
                    for attr in ("name", "topic"):
                        if attr in item.__match_args__ and isinstance(getattr(item, attr), str):
                            setattr(item, attr, f"t{i}")
                    for attr in ("partition_index", "partition", "index"):
                        if attr in item.__match_args__ and isinstance(getattr(item, attr), int):
                            setattr(item, attr, i)
            elif f.type == "string":
                value = ["t0", "t1"]
            elif f.type == "uuid":
                value = [uuid.uuid4(), uuid.uuid4()]
            elif f.type in ("int8", "int16", "int32", "int64"):
                value = [0, 1]
            else:
                value = []
            setattr(obj, f.attr, value)
        elif f.type == "uuid":
            setattr(obj, f.attr, uuid.uuid4())
        elif f.type == "string" and getattr(obj, f.attr) is None and not f.nullable(version):
            setattr(obj, f.attr, "x")
        elif f.type == "struct" and getattr(obj, f.attr) is None:
            setattr(obj, f.attr, f.struct())
    return obj


def codes(obj, version: int) -> list[int]:
    """Every error-code value in a decoded response (fields of `version` only), depth first."""
    out = []
    if isinstance(obj, GeneratedStruct):
        for f in obj.SCHEMA:
            if not f.present(version):
                continue
            value = getattr(obj, f.attr)
            if f.attr in ERROR_FIELDS and isinstance(value, int):
                out.append(value)
            else:
                out += codes(value, version)
    elif isinstance(obj, list):
        for item in obj:
            out += codes(item, version)
    return out


def round_trip(response, version: int):
    return type(response).decode(response.encode(version), version)


def advertised() -> list[tuple[int, int]]:
    return [(key, v) for key, (lo, hi) in sorted(SUPPORTED_VERSIONS.items()) if key in HANDLERS
            for v in range(lo, hi + 1)]


# responses with nowhere to put an error for the sample request (none so far; listed so a new API shows up)
NO_ERROR_FIELD: set[int] = set()


# -- the error response builder -------------------------------------------------------------------
@pytest.mark.parametrize("key,version", advertised(), ids=lambda x: str(x))
def test_error_response_is_well_formed_for_every_served_api_and_version(key, version):
    request = sample(REQUEST_TYPES[key], version)
    request = type(request).decode(request.encode(version), version)   # as the broker would see it
    response = error_response(request, version, NOT_LEADER)
    decoded = round_trip(response, version)
    assert isinstance(decoded, RESPONSE_TYPES[key])
    # Fetch's top-level error_code is the fetch session's (0 unless the error is a session error)
    found = codes(decoded.responses, version) if key == 1 else codes(decoded, version)
    if key in NO_ERROR_FIELD:
        assert found == []
    else:
        assert found and set(found) == {NOT_LEADER}, (api_name_of(key), version, decoded)


def test_produce_error_mirrors_topics_and_partitions():
    request = ProduceRequest(acks=-1, timeout_ms=1000, topic_data=[
        ProduceRequest.TopicProduceData(name="a", partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=b""),
            ProduceRequest.PartitionProduceData(index=3, records=b"")]),
        ProduceRequest.TopicProduceData(name="b", partition_data=[ProduceRequest.PartitionProduceData(index=1)])])
    for version in (3, 9, 11):
        response = round_trip(error_response(request, version, NOT_LEADER), version)
        got = [(t.name, p.index, p.error_code, p.base_offset) for t in response.responses
               for p in t.partition_responses]
        assert got == [("a", 0, 6, -1), ("a", 3, 6, -1), ("b", 1, 6, -1)]


def test_fetch_error_by_partition_and_session_errors_at_the_top():
    tid = uuid.uuid4()
    request = FetchRequest(max_wait_ms=100, topics=[FetchRequest.FetchTopic(topic="a", topic_id=tid, partitions=[
        FetchRequest.FetchPartition(partition=2, fetch_offset=5)])])
    for version in (4, 12, 13, 16):
        response = round_trip(error_response(request, version, NOT_LEADER), version)
        assert response.error_code == 0
        [topic] = response.responses
        assert (topic.topic if version < 13 else topic.topic_id) == ("a" if version < 13 else tid)
        [part] = topic.partitions
        assert (part.partition_index, part.error_code, part.high_watermark) == (2, NOT_LEADER, -1)
    code = int(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
    response = round_trip(error_response(request, 13, code), 13)
    assert response.error_code == code and response.responses == []


def test_metadata_error_per_topic_with_this_broker_listed():
    broker = SimpleNamespace(node_id=7, advertised_host="127.0.0.1", advertised_port=9999, cluster_id="c1")
    request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="a"),
                                      MetadataRequest.MetadataRequestTopic(name="b")])
    response = round_trip(error_response(request, 12, 3, broker=broker), 12)
    assert [(t.name, t.error_code) for t in response.topics] == [("a", 3), ("b", 3)]
    assert [(b.node_id, b.host, b.port) for b in response.brokers] == [(7, "127.0.0.1", 9999)]
    assert (response.controller_id, response.cluster_id) == (7, "c1")


def test_find_coordinator_both_shapes():
    code = int(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    old = round_trip(error_response(FindCoordinatorRequest(key="g"), 3, code), 3)
    assert (old.error_code, old.node_id, old.port) == (code, -1, -1)
    new = round_trip(error_response(FindCoordinatorRequest(coordinator_keys=["g1", "g2"]), 4, code), 4)
    assert [(c.key, c.error_code, c.node_id) for c in new.coordinators] == [("g1", code, -1), ("g2", code, -1)]


def test_offset_fetch_old_and_grouped_shapes():
    old = OffsetFetchRequest(group_id="g", topics=[OffsetFetchRequest.OffsetFetchRequestTopic(
        name="a", partition_indexes=[0, 4])])
    response = round_trip(error_response(old, 7, 16), 7)
    assert response.error_code == 16
    assert [(p.partition_index, p.error_code, p.committed_offset) for p in response.topics[0].partitions] == [
        (0, 16, -1), (4, 16, -1)]
    new = OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(
        group_id="g", topics=[OffsetFetchRequest.OffsetFetchRequestTopics(name="a", partition_indexes=[1])])])
    response = round_trip(error_response(new, 8, 16), 8)
    [group] = response.groups
    assert (group.group_id, group.error_code) == ("g", 16)
    assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in group.topics] == [
        ("a", [(1, 16)])]


def test_delete_topics_and_add_partitions_to_txn_shapes():
    response = round_trip(error_response(DeleteTopicsRequest(topic_names=["a", "b"]), 5, 41), 5)
    assert [(r.name, r.error_code) for r in response.responses] == [("a", 41), ("b", 41)]
    tid = uuid.uuid4()
    request = DeleteTopicsRequest(topics=[DeleteTopicsRequest.DeleteTopicState(name=None, topic_id=tid)])
    response = round_trip(error_response(request, 6, 41), 6)
    assert [(r.topic_id, r.error_code) for r in response.responses] == [(tid, 41)]
    v3 = AddPartitionsToTxnRequest(v3_and_below_transactional_id="tx", v3_and_below_topics=[
        AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name="a", partitions=[0, 1])])
    response = round_trip(error_response(v3, 3, 51), 3)
    assert [(t.name, [(p.partition_index, p.partition_error_code) for p in t.results_by_partition])
            for t in response.results_by_topic_v3_and_below] == [("a", [(0, 51), (1, 51)])]
    v4 = AddPartitionsToTxnRequest(transactions=[AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
        transactional_id="tx", topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name="a", partitions=[2])])])
    response = round_trip(error_response(v4, 4, 51), 4)
    assert response.error_code == 51
    [txn] = response.results_by_transaction
    assert txn.transactional_id == "tx"
    assert [(p.partition_index, p.partition_error_code) for p in txn.topic_results[0].results_by_partition] == [
        (2, 51)]


@pytest.mark.parametrize("api", ["JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "InitProducerId", "EndTxn",
                                 "AddOffsetsToTxn", "ApiVersions", "ListGroups", "DescribeCluster"])
def test_top_level_error_code(api):
    key = api_key_of(api)
    for version in range(SUPPORTED_VERSIONS[key][0], SUPPORTED_VERSIONS[key][1] + 1):
        request = sample(REQUEST_TYPES[key], version)
        response = round_trip(error_response(request, version, 15), version)
        assert response.error_code == 15
        if api == "InitProducerId":
            assert (response.producer_id, response.producer_epoch) == (-1, -1)
        if api == "JoinGroup":
            assert response.generation_id == -1


# -- names ---------------------------------------------------------------------------------------
def test_api_and_error_names():
    assert api_key_of("Produce") == 0 == api_key_of("produce") == api_key_of("ProduceRequest") == api_key_of(0)
    assert api_key_of("ApiVersions") == 18 and api_key_of("18") == 18 and api_name_of(11) == "JoinGroup"
    assert error_code_of("NOT_LEADER_OR_FOLLOWER") == 6 == error_code_of("not_leader_or_follower") == error_code_of(6)
    for bad in ("Nope", 999, True):
        with pytest.raises(ValueError):
            api_key_of(bad)
    with pytest.raises(ValueError):
        error_code_of("NOT_AN_ERROR")


# -- matching and actions --------------------------------------------------------------------------
def ctx(api: str, version: int = 9, client_id: str | None = "c", connection=None) -> RequestContext:
    header = SimpleNamespace(api_key=api_key_of(api), api_version=version, client_id=client_id, correlation_id=42)
    return RequestContext(services=SimpleNamespace(), connection=connection, header=header)


def produce(*targets: tuple[str, int]) -> ProduceRequest:
    return ProduceRequest(acks=-1, topic_data=[ProduceRequest.TopicProduceData(
        name=t, partition_data=[ProduceRequest.PartitionProduceData(index=p)]) for t, p in targets])


def run(coro):
    return asyncio.run(coro)


def test_count_then_gone_and_first_rule_wins():
    faults = FaultInjector()
    first = faults.add_rule("Produce", error="NOT_LEADER_OR_FOLLOWER", count=2)
    second = faults.add_rule("Produce", error="REQUEST_TIMED_OUT", count=None)
    hits = [faults.match(ctx("Produce"), produce(("a", 0))) for _ in range(4)]
    assert [r.id for r in hits] == [first.id, first.id, second.id, second.id]
    assert [r.id for r in faults.list_rules()] == [second.id] and second.hits == 2
    assert faults.remove_rule(second.id) and not faults.remove_rule(second.id)
    assert faults.match(ctx("Produce"), produce(("a", 0))) is None


def test_matching_by_api_version_client_id_topic_and_partition():
    faults = FaultInjector()
    faults.add_rule("Produce", error=6, count=None, version=9, client_id="me", topic="a", partition=1)
    assert faults.match(ctx("Fetch"), produce(("a", 1))) is None
    assert faults.match(ctx("Produce", version=8, client_id="me"), produce(("a", 1))) is None
    assert faults.match(ctx("Produce", client_id="other"), produce(("a", 1))) is None
    assert faults.match(ctx("Produce", client_id="me"), produce(("b", 1))) is None
    assert faults.match(ctx("Produce", client_id="me"), produce(("a", 0))) is None
    assert faults.match(ctx("Produce", client_id="me"), produce(("b", 0), ("a", 1))) is not None


def test_probability_is_a_fraction_of_matching_requests():
    faults = FaultInjector(rng=random.Random(12))
    faults.add_rule("Heartbeat", error=27, count=None, probability=0.3)
    hits = sum(faults.match(ctx("Heartbeat"), None) is not None for _ in range(2000))
    assert 450 < hits < 750
    never = FaultInjector()
    never.add_rule("Heartbeat", error=27, count=None, probability=0.0)
    assert all(never.match(ctx("Heartbeat"), None) is None for _ in range(100))


def test_expiry():
    faults = FaultInjector()
    faults.add_rule("Metadata", delay_ms=1, count=None, expires_in_s=0.05)
    assert faults.match(ctx("Metadata"), MetadataRequest(topics=None)) is not None
    assert faults.list_rules()[0].to_json()["expires_in_s"] <= 0.05
    time.sleep(0.08)
    assert faults.match(ctx("Metadata"), MetadataRequest(topics=None)) is None
    assert faults.list_rules() == []


@pytest.mark.parametrize("kwargs", [{}, {"drop": True, "disconnect": True}, {"error": 6, "drop": True},
                                    {"error": 6, "count": 0}, {"error": 6, "probability": 2},
                                    {"delay_ms": -1}, {"error": 6, "expires_in_s": 0}])
def test_invalid_rules(kwargs):
    with pytest.raises(ValueError):
        FaultInjector().add_rule("Produce", **kwargs)


def test_request_partitions():
    assert request_partitions(produce(("a", 0), ("b", 2))) == [("a", 0), ("b", 2)]
    tid = uuid.uuid4()
    fetch = FetchRequest(topics=[FetchRequest.FetchTopic(topic_id=tid, partitions=[
        FetchRequest.FetchPartition(partition=1)])])
    assert request_partitions(fetch, lambda i: SimpleNamespace(name="named") if i == tid else None) == [
        ("named", 1)]
    assert request_partitions(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="m")])) == [
        ("m", None)]
    assert request_partitions(DeleteTopicsRequest(topic_names=["x"])) == [("x", None)]


def test_intercept_records_and_answers_errors_without_the_handler():
    async def main():
        faults = FaultInjector()
        faults.add_rule("Produce", error="NOT_LEADER_OR_FOLLOWER")
        request = produce(("a", 0))
        response = await faults.intercept(ctx("Produce"), request)
        assert [p.error_code for t in response.responses for p in t.partition_responses] == [NOT_LEADER]
        assert await faults.intercept(ctx("Produce"), request) is None      # count 1: used up
        [first, second] = faults.get_recorded("Produce")
        assert (first.seq, first.api, first.version, first.client_id, first.correlation_id) == (
            1, "Produce", 9, "c", 42)
        assert first.body is request and second.seq == 2
        assert to_json(first.body)["topic_data"][0]["name"] == "a"
        assert faults.get_recorded("Fetch") == []
        faults.clear_recorded()
        assert faults.get_recorded() == []

    run(main())


def test_intercept_delay_latency_disconnect_and_drop():
    async def main():
        faults = FaultInjector()
        faults.add_rule("Fetch", delay_ms=150)
        start = time.monotonic()
        assert await faults.intercept(ctx("Fetch"), FetchRequest()) is None   # delayed, then handled
        assert time.monotonic() - start >= 0.14
        faults.set_latency(100)
        start = time.monotonic()
        assert await faults.intercept(ctx("Metadata"), MetadataRequest()) is None
        assert time.monotonic() - start >= 0.09
        faults.set_latency(0)
        faults.add_rule("Heartbeat", disconnect=True)
        with pytest.raises(ConnectionClosed):
            await faults.intercept(ctx("Heartbeat"), None)
        connection = SimpleNamespace(_closed=False, peer="p")
        faults.add_rule("Produce", drop=True)
        asyncio.get_running_loop().call_later(0.2, setattr, connection, "_closed", True)
        start = time.monotonic()
        assert await faults.intercept(ctx("Produce", connection=connection), produce(("a", 0))) is DROP
        assert time.monotonic() - start >= 0.19   # held until the connection closed

    run(main())


def test_an_injector_built_with_its_brokers_collaborators():
    """Broker.enable_faults hands the injector what it reads (no broker): rules on topics named by
    id, the broker a Metadata error lists (its address as advertised when answering), serving."""
    async def main():
        tid = uuid.uuid4()
        address = ["h1", 1]
        serving = [True]
        faults = FaultInjector(topic_by_id=lambda i: SimpleNamespace(name="t") if i == tid else None, node_id=4,
                               advertised=lambda: tuple(address), cluster_id=lambda: "cid",
                               serving=lambda: serving[0])
        faults.add_rule("Fetch", topic="t", error="NOT_LEADER_OR_FOLLOWER")
        by_id = FetchRequest(topics=[FetchRequest.FetchTopic(topic_id=tid, partitions=[
            FetchRequest.FetchPartition(partition=0)])])
        assert await faults.intercept(ctx("Fetch"), by_id) is not None
        faults.add_rule("Metadata", error="NOT_CONTROLLER")
        address[:] = ["h2", 2]
        response = await faults.intercept(ctx("Metadata"), MetadataRequest(topics=[]))
        assert [(b.node_id, b.host, b.port) for b in response.brokers] == [(4, "h2", 2)]
        assert (response.controller_id, response.cluster_id) == (4, "cid")
        faults.add_rule("Produce", drop=True)
        serving[0] = False   # the broker stopped serving: a dropped request no longer waits
        connection = SimpleNamespace(_closed=False, peer="p")
        assert await asyncio.wait_for(faults.intercept(ctx("Produce", connection=connection),
                                                       produce(("a", 0))), 1) is DROP

    run(main())


def test_recorder_keeps_the_newest():
    async def main():
        faults = FaultInjector(max_recorded=3)
        for _ in range(5):
            await faults.intercept(ctx("Metadata"), MetadataRequest())
        assert [r.seq for r in faults.get_recorded()] == [3, 4, 5]

    run(main())


def test_control_listener_must_be_loopback():
    from kafkapy.broker.fault_control import parse_control_address

    assert parse_control_address("127.0.0.1:0") == ("127.0.0.1", 0)
    assert parse_control_address("http://localhost:8080") == ("localhost", 8080)
    assert parse_control_address("[::1]:9") == ("::1", 9)
    for bad in ("0.0.0.0:80", "example.com:80", "127.0.0.1", ":x"):
        with pytest.raises(ValueError):
            parse_control_address(bad)
