"""Client quotas: Kafka's rate arithmetic, throttle times, entity precedence and the broker wiring."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.metadata.zk.store import _quota_entity, _quota_znode
from kafkapy.protocol.messages import AlterClientQuotasRequest as Alter
from kafkapy.protocol.messages import DescribeClientQuotasRequest as Describe
from kafkapy.protocol.messages import FetchResponse, ProduceResponse
from kafkapy.security.quotas import (
    ClientQuotas,
    QuotaEntity,
    QuotaError,
    Rate,
    TokenBucket,
    resolve_quota,
    throttle_time_ms,
    validate_quota,
)
from tests.broker.inprocess import InProcessBroker

MB = 1_048_576


class Clock:
    def __init__(self, now: float = 1000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


# -- Rate and throttle time -------------------------------------------------------------------------

def test_rate_pads_to_ten_full_windows_while_young():
    rate = Rate()
    rate.record(1000, 0.0)
    assert rate.window_size(0.0) == pytest.approx(10.0)
    assert rate.measure(0.0) == pytest.approx(100.0)
    rate.record(1000, 3.5)
    # the oldest sample began at 0: 3.5 s elapsed, 3 full windows, padded by 7 more
    assert rate.window_size(3.5) == pytest.approx(10.5)
    assert rate.measure(3.5) == pytest.approx(2000 / 10.5)


def test_rate_forgets_samples_older_than_eleven_windows():
    rate = Rate()
    rate.record(5000, 0.0)
    for t in range(1, 11):
        rate.record(100, float(t))
    assert rate.measure(10.0) == pytest.approx(6000 / 10.0)
    rate.record(100, 11.0)  # the 12th sample reuses the slot of the first
    assert rate.measure(11.0) == pytest.approx(1100 / 10.0)
    assert rate.measure(30.0) == 0.0


def test_throttle_time_is_kafkas_formula():
    # O * W / (W + X) = T  =>  X = (O - T) / T * W
    assert throttle_time_ms(2000, 1000, 10.0) == 10_000
    assert throttle_time_ms(1500, 1000, 10.5) == 5_250
    assert throttle_time_ms(999, 1000, 10.0) == 0


@given(observed=st.floats(1, 1e9), bound=st.floats(1, 1e9), window=st.floats(10, 11))
def test_throttle_brings_the_rate_back_to_the_bound(observed, bound, window):
    x = throttle_time_ms(observed, bound, window) / 1000
    if observed > bound:
        assert observed * window / (window + x) == pytest.approx(bound, rel=1e-3, abs=1e-3 * bound + 1e-6)
    else:
        assert x == 0


def test_first_violation_throttles_by_the_excess_over_the_padded_window():
    clock = Clock()
    quotas = ClientQuotas({QuotaEntity.client("c"): {"producer_byte_rate": 1000.0}}, clock=clock)
    assert quotas.record("producer_byte_rate", "ANONYMOUS", "c", 10_000) == 0  # exactly 1000/s over 10 s
    # 20000 bytes over a 10 s window is 2000/s: (2000 - 1000) / 1000 * 10 s
    assert quotas.record("producer_byte_rate", "ANONYMOUS", "c", 10_000) == 10_000
    assert quotas.record("producer_byte_rate", "ANONYMOUS", "other", 10**9) == 0  # no quota for it


def test_request_percentage_throttle_is_capped_at_one_window():
    quotas = ClientQuotas({QuotaEntity.client("c"): {"request_percentage": 10.0}}, clock=Clock())
    assert quotas.record("request_percentage", "ANONYMOUS", "c", 5 * 100.0) == 1000


@settings(max_examples=30, deadline=None)
@given(bound=st.integers(10_000, 10_000_000), share=st.floats(0.02, 1.0), seconds=st.integers(30, 120))
def test_a_client_honouring_its_throttle_averages_the_quota(bound, share, seconds):
    """A client that sends at 10x its quota and waits out every throttle (KIP-219) gets ~the quota."""
    clock = Clock(0.0)
    quotas = ClientQuotas({QuotaEntity.client("c"): {"producer_byte_rate": float(bound)}}, clock=clock)
    size = max(int(bound * share), 1)  # each request is a share of one second's quota
    sent = 0
    while clock.now < seconds:
        throttle = quotas.record("producer_byte_rate", "ANONYMOUS", "c", size)
        sent += size
        clock.now += throttle / 1000 + size / (10 * bound)
    # the first ~10 s may burst one padded window's worth, one request may overshoot, and as in
    # Kafka the oldest sample leaving the window lets a little through now and then (a few percent)
    assert sent <= bound * seconds * 1.03 + bound * 11 + 2 * size
    assert sent >= bound * seconds * 0.9 - size


def test_token_bucket_bursts_then_throttles_by_the_deficit():
    bucket = TokenBucket()
    assert bucket.record(110, 10.0, 0.0) == 0  # burst: 10/s * 11 s
    assert bucket.record(20, 10.0, 0.0) == 2000  # 20 partitions short at 10/s
    assert bucket.throttle_ms(10.0, 1.0) == 1000
    assert bucket.throttle_ms(10.0, 2.0) == 0


# -- precedence --------------------------------------------------------------------------------------

ORDER = [
    lambda u, c: QuotaEntity.user_client(u, c),
    lambda u, c: QuotaEntity.user_client(u, None),
    lambda u, c: QuotaEntity.user(u),
    lambda u, c: QuotaEntity.user_client(None, c),
    lambda u, c: QuotaEntity.user_client(None, None),
    lambda u, c: QuotaEntity.user(None),
    lambda u, c: QuotaEntity.client(c),
    lambda u, c: QuotaEntity.client(None),
]
TAGS = [("u", "c"), ("u", "c"), ("u", ""), ("u", "c"), ("u", "c"), ("u", ""), ("", "c"), ("", "c")]


@given(configured=st.sets(st.integers(0, 7)), others=st.sets(st.sampled_from([0, 1, 2, 3, 6])))
def test_first_configured_entity_in_kafkas_order_wins(configured, others):
    quotas = {ORDER[i]("u", "c"): {"producer_byte_rate": float(i + 1)} for i in configured}
    # entities naming another user or client id never apply
    for i in others:
        quotas.setdefault(ORDER[i]("v", "d"), {"producer_byte_rate": 999.0})
    bound, tags = resolve_quota(quotas, "producer_byte_rate", "u", "c")
    if configured:
        first = min(configured)
        assert bound == first + 1 and tags == TAGS[first]
    else:
        assert bound is None


def test_precedence_is_per_quota_key():
    quotas = {QuotaEntity.user("u"): {"producer_byte_rate": 1.0},
              QuotaEntity.client("c"): {"consumer_byte_rate": 2.0}}
    assert resolve_quota(quotas, "consumer_byte_rate", "u", "c") == (2.0, ("", "c"))
    assert resolve_quota(quotas, "producer_byte_rate", "u", "c") == (1.0, ("u", ""))


def test_sensors_are_shared_by_the_matched_entity():
    clock = Clock()
    quotas = ClientQuotas({QuotaEntity.user("u"): {"producer_byte_rate": 1000.0},
                           QuotaEntity.client(None): {"producer_byte_rate": 1000.0}}, clock=clock)
    # two client ids of user u share the user's quota
    assert quotas.record("producer_byte_rate", "u", "a", 10_000) == 0
    assert quotas.record("producer_byte_rate", "u", "b", 10_000) > 0
    # the client default gives each client id its own rate
    assert quotas.record("producer_byte_rate", "x", "a", 10_000) == 0
    assert quotas.record("producer_byte_rate", "x", "b", 10_000) == 0


# -- validation and the ZooKeeper layout -------------------------------------------------------------

def test_validation_follows_kafka():
    validate_quota("producer_byte_rate", 1048576)
    validate_quota("request_percentage", 12.5)
    for key, value in [("producer_byte_rate", 1.5), ("producer_byte_rate", 0), ("bogus", 1),
                       ("consumer_byte_rate", -1)]:
        with pytest.raises(QuotaError):
            validate_quota(key, value)
    for components in [{}, {"ip": "1.2.3.4"}, {"group": "g"}]:
        with pytest.raises(QuotaError):
            QuotaEntity.of(components).validate()


names = st.one_of(st.none(), st.text(min_size=1, max_size=20))


@given(user=names, client=names, kind=st.sampled_from(["user", "client", "both"]))
def test_znode_paths_round_trip(user, client, kind):
    entity = {"user": QuotaEntity.user(user), "client": QuotaEntity.client(client),
              "both": QuotaEntity.user_client(user, client)}[kind]
    entity_type, name = _quota_znode(entity)
    assert all(part and "/" not in part.replace("/clients/", "", 1) for part in [name])
    assert _quota_entity(f"{entity_type}/{name}") == entity


def test_znode_names_are_kafkas():
    assert _quota_znode(QuotaEntity.user_client("CN=a b", None)) == ("users", "CN%3Da%20b/clients/<default>")
    assert _quota_znode(QuotaEntity.client("limited")) == ("clients", "limited")
    assert _quota_znode(QuotaEntity.user(None)) == ("users", "<default>")


# -- the dispatch hook ---------------------------------------------------------------------------------

class FakeConnection:
    def __init__(self):
        self.muted: list[float] = []

    def mute_for(self, seconds: float) -> None:
        self.muted.append(seconds)


def _ctx(client_id: str = "c", user: str = "ANONYMOUS"):
    return SimpleNamespace(principal=SimpleNamespace(name=user), client_id=client_id, connection=FakeConnection(),
                           broker=None)


def test_produce_over_quota_sets_throttle_time_and_mutes():
    quotas = ClientQuotas({QuotaEntity.client("c"): {"producer_byte_rate": 1000.0}}, clock=Clock())
    ctx = _ctx()
    request = SimpleNamespace(acks=1)
    response = ProduceResponse(responses=[], throttle_time_ms=0)
    quotas.after_request(ctx, 0, request, response, 10_000, 0.0)
    assert response.throttle_time_ms == 0 and ctx.connection.muted == []
    quotas.after_request(ctx, 0, request, response, 10_000, 0.0)
    assert response.throttle_time_ms == 10_000 and ctx.connection.muted == [10.0]


def _fetch_response(*sizes: int) -> FetchResponse:
    P = FetchResponse.PartitionData
    return FetchResponse(responses=[FetchResponse.FetchableTopicResponse(
        topic="t", partitions=[P(partition_index=i, records=b"x" * size) for i, size in enumerate(sizes)])])


def test_throttled_fetch_is_answered_without_records_and_not_counted():
    clock = Clock()
    quotas = ClientQuotas({QuotaEntity.client("c"): {"consumer_byte_rate": 1000.0}}, clock=clock)
    ctx = _ctx()
    request = SimpleNamespace(replica_id=-1, replica_state=None)
    first = _fetch_response(5000, 4000)
    quotas.after_request(ctx, 1, request, first, 100, 0.0)
    assert [len(p.records) for p in first.responses[0].partitions] == [5000, 4000]
    second = _fetch_response(3000)
    quotas.after_request(ctx, 1, request, second, 100, 0.0)
    assert second.responses[0].partitions[0].records == b"" and second.throttle_time_ms > 0
    # the dropped response was taken back out: a small fetch after the mute passes
    clock.now += second.throttle_time_ms / 1000
    third = _fetch_response(100)
    quotas.after_request(ctx, 1, request, third, 100, 0.0)
    assert len(third.responses[0].partitions[0].records) == 100


def test_a_fetch_larger_than_a_quota_window_is_cut_to_it():
    quotas = ClientQuotas({QuotaEntity.client("c"): {"consumer_byte_rate": 1000.0}}, clock=Clock())
    response = _fetch_response(6000, 6000)  # the window takes 10 * 1000
    quotas.after_request(_ctx(), 1, SimpleNamespace(replica_id=-1, replica_state=None), response, 100, 0.0)
    assert [len(p.records) for p in response.responses[0].partitions] == [6000, 0]


def test_replica_fetches_are_not_counted():
    quotas = ClientQuotas({QuotaEntity.client(None): {"consumer_byte_rate": 1.0, "request_percentage": 0.01}},
                          clock=Clock())
    response = _fetch_response(10_000)
    ctx = _ctx()
    quotas.after_request(ctx, 1, SimpleNamespace(replica_id=2, replica_state=None), response, 100, 1.0)
    assert response.throttle_time_ms == 0 and ctx.connection.muted == []


# -- storage, APIs and the broker's switch -------------------------------------------------------------

def test_quotas_switch_on_and_off_and_persist(tmp_path):
    broker = InProcessBroker(tmp_path)
    try:
        assert broker.broker.client_quotas.current is None
        response = broker.call(Alter(entries=[Alter.EntryData(
            entity=[Alter.EntityData("user", "alice"), Alter.EntityData("client-id", None)],
            ops=[Alter.OpData("producer_byte_rate", 1048576.0, False)])]), 1)
        assert response.entries[0].error_code == 0
        assert broker.broker.client_quotas.current is not None
        assert broker.broker.client_quotas.current.quotas == {QuotaEntity.user_client("alice", None): {"producer_byte_rate": MB}}
    finally:
        broker.close()
    broker = InProcessBroker(tmp_path)  # read back from the metadata file
    try:
        assert broker.broker.client_quotas.current is not None
        described = broker.call(Describe(components=[Describe.ComponentData("client-id", 1, None)]), 0)
        assert [[(e.entity_type, e.entity_name) for e in entry.entity] for entry in described.entries] == [
            [("client-id", None), ("user", "alice")]]
        broker.call(Alter(entries=[Alter.EntryData(
            entity=[Alter.EntityData("user", "alice"), Alter.EntityData("client-id", None)],
            ops=[Alter.OpData("producer_byte_rate", 0.0, True)])]), 0)
        assert broker.broker.client_quotas.current is None
        assert broker.call(Describe(components=[]), 1).entries == []
    finally:
        broker.close()


def test_alter_rejects_bad_entries_one_by_one(tmp_path):
    broker = InProcessBroker(tmp_path)
    try:
        response = broker.call(Alter(entries=[
            Alter.EntryData(entity=[Alter.EntityData("client-id", "a")],
                            ops=[Alter.OpData("producer_byte_rate", 100.0, False)]),
            Alter.EntryData(entity=[Alter.EntityData("client-id", "b"), Alter.EntityData("client-id", "c")],
                            ops=[Alter.OpData("producer_byte_rate", 100.0, False)]),
            Alter.EntryData(entity=[Alter.EntityData("client-id", "d")],
                            ops=[Alter.OpData("connection_creation_rate", 1.0, False)]),
        ]), 1)
        assert [e.error_code for e in response.entries] == [0, 42, 42]
        assert list(broker.broker.metadata.describe_client_quotas()) == [QuotaEntity.client("a")]
    finally:
        broker.close()


# -- controller_mutation_rate (KIP-599) ----------------------------------------------------------------

class MutedConnection(FakeConnection):
    from kafkapy.security.principal import ANONYMOUS as principal

    listener = None
    peer = "127.0.0.1:1"


def _dispatch(broker, request, version: int):
    """What dispatch does around a handler, with the before_request call the strict mode needs."""
    import asyncio

    from kafkapy.broker.dispatch import HANDLERS, RequestContext
    from kafkapy.protocol.headers import RequestHeader

    key = request.API_KEY
    request = type(request).decode(request.encode(version), version)
    connection = MutedConnection()
    ctx = RequestContext(broker, connection, RequestHeader(key, version, 1, "mutator"))
    broker.client_quotas.current.before_request(ctx, key, request)
    response = asyncio.run(HANDLERS[key](ctx, request))
    broker.client_quotas.current.after_request(ctx, key, request, response, 100, 0.0)
    return response, connection.muted


def _set_mutation_rate(broker, rate: float | None) -> None:
    broker.call(Alter(entries=[Alter.EntryData(entity=[Alter.EntityData("client-id", "mutator")], ops=[
        Alter.OpData("controller_mutation_rate", rate or 0.0, rate is None)])]), 1)


def test_strict_create_topics_fails_topic_by_topic_once_the_bucket_is_empty(tmp_path):
    from kafkapy.protocol.messages import CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest

    broker = InProcessBroker(tmp_path)
    try:
        _set_mutation_rate(broker, 1.0)  # a burst of 11 partitions
        T = CreateTopicsRequest.CreatableTopic
        request = CreateTopicsRequest(topics=[T(name=f"t{i}", num_partitions=6, replication_factor=1)
                                              for i in range(3)], timeout_ms=5000)
        response, muted = _dispatch(broker.broker, request, 7)
        # t0 takes 6 of 11, t1 takes the other 5 and 1 more (the bucket may go negative once), t2 fails
        assert [(r.name, r.error_code) for r in response.topics] == [("t0", 0), ("t1", 0), ("t2", 89)]
        assert response.topics[2].error_message == "The throttling quota has been exceeded."
        assert 0 < response.throttle_time_ms <= 1000 and muted == [response.throttle_time_ms / 1000]
        assert broker.broker.metadata.get_topic("t2") is None

        # CreatePartitions v3 and DeleteTopics v5 are strict too
        P = CreatePartitionsRequest.CreatePartitionsTopic
        response, _ = _dispatch(broker.broker, CreatePartitionsRequest(
            topics=[P(name="t0", count=8, assignments=None)], timeout_ms=5000), 3)
        assert [(r.name, r.error_code) for r in response.results] == [("t0", 89)]
        response, _ = _dispatch(broker.broker, DeleteTopicsRequest(topic_names=["t0", "t1"], timeout_ms=5000), 5)
        assert [(r.name, r.error_code) for r in response.responses] == [("t0", 89), ("t1", 89)]
    finally:
        broker.close()


def test_permissive_versions_mutate_and_throttle_after(tmp_path):
    from kafkapy.protocol.messages import CreateTopicsRequest, DeleteTopicsRequest

    broker = InProcessBroker(tmp_path)
    try:
        _set_mutation_rate(broker, 1.0)
        T = CreateTopicsRequest.CreatableTopic
        request = CreateTopicsRequest(topics=[T(name=f"p{i}", num_partitions=6, replication_factor=1)
                                              for i in range(3)], timeout_ms=5000)
        response, muted = _dispatch(broker.broker, request, 5)
        assert [r.error_code for r in response.topics] == [0, 0, 0]
        assert 6900 < response.throttle_time_ms <= 7000  # 18 - 11 = 7 partitions short at 1/s
        assert muted == [response.throttle_time_ms / 1000]
        # a deletion counts the topic's partitions, read before it is gone
        response, muted = _dispatch(broker.broker, DeleteTopicsRequest(topic_names=["p0"], timeout_ms=5000), 4)
        assert response.responses[0].error_code == 0
        assert len(muted) == 1 and 12.0 < muted[0] <= 13.0  # 7 + 6 short, less what refilled since
        _set_mutation_rate(broker, None)
        assert broker.broker.client_quotas.current is None
    finally:
        broker.close()


def test_quota_apis_need_cluster_configs_permissions(tmp_path):
    import asyncio

    from kafkapy.broker.dispatch import HANDLERS, RequestContext
    from kafkapy.protocol.headers import RequestHeader

    def call(request):
        ctx = RequestContext(broker.broker, MutedConnection(), RequestHeader(request.API_KEY, 1, 1, "admin"))
        return asyncio.run(HANDLERS[request.API_KEY](ctx, request))

    broker = InProcessBroker(tmp_path, **{"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"})
    try:
        assert call(Describe(components=[])).error_code == 31  # CLUSTER_AUTHORIZATION_FAILED
        response = call(Alter(entries=[Alter.EntryData(entity=[Alter.EntityData("client-id", "a")],
                                                       ops=[Alter.OpData("producer_byte_rate", 1.0)])]))
        assert [e.error_code for e in response.entries] == [31]
        assert broker.broker.metadata.describe_client_quotas() == {}
    finally:
        broker.close()


def test_busy_time_leaves_out_the_time_a_handler_is_parked():
    import asyncio
    import time as _time

    from kafkapy.security.quota_tracker import BusyTime

    async def handler():
        started = _time.perf_counter()
        while _time.perf_counter() - started < 0.05:  # 50 ms of work
            pass
        await asyncio.sleep(0.3)  # parked, as a long-poll fetch
        return "done"

    async def main():
        timed = BusyTime(handler())
        assert await timed == "done"
        return timed.seconds

    assert 0.04 <= asyncio.run(main()) < 0.2

    async def cancelled():
        timed = BusyTime(asyncio.sleep(10))
        task = asyncio.ensure_future(_wrap(timed))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    async def _wrap(timed):
        return await timed

    asyncio.run(cancelled())
