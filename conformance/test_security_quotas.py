"""Client quotas against a real broker process: AlterClientQuotas / DescribeClientQuotas, then
confluent-kafka clients held to producer_byte_rate and consumer_byte_rate while others are not.

Neither confluent-kafka nor kafka-python has the client quota admin calls, so they are sent with
kafkapy's own protocol codecs over a socket. Rates are measured from the first delivery (or the
first consumed record) over a fixed run, as Kafka's quota is an average over ~10 s windows: a new
client may burst up to ~10 s worth of quota before it is throttled. In a two-broker ZooKeeper
cluster, quotas set through one broker are Kafka's znodes and apply on the other, and a znode an
older `kafka-configs --zookeeper` wrote is picked up from its config_change_ notification.
"""
from __future__ import annotations

import json
import struct
import threading
import time
import uuid

import pytest

pytest.importorskip("confluent_kafka", reason="!!! confluent-kafka not installed: pip install -e '.[test]'")

from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from conformance.broker_process import start_broker  # noqa: E402
from conformance.cluster_harness import cluster_fixture, wait_until  # noqa: E402
from conformance.kafka_wire import RawConnection, encode_batch, frame, request_header_v1  # noqa: E402
from kafkapy.protocol.messages import (  # noqa: E402
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
    ProduceRequest,
    ProduceResponse,
)

pytestmark = pytest.mark.timeout(60)

QUOTA = 1_048_576  # bytes/s
TOPIC = "quota-test"
PARTITIONS = 3
VALUE = bytes(range(256)) * 40  # 10 KiB, sent uncompressed
RUN_S = 11.0
# Kafka's rate is the total of the last 11 one-second samples over >= 10 s: a client at full speed
# sends ~10 s worth of quota at once, is throttled until that is paid off, and when the burst's
# sample expires (11 s) it may burst again. Averages are therefore taken over the first 10 s.
MEASURE_S = 10.0


# ---------------------------------------------------------------- the quota APIs over a socket

def _roundtrip(bootstrap: str, request, response_cls, version: int = 0, client_id: str = "kafkapy-conformance"):
    """Send one request at a non-flexible version (header v1) and decode its response (header v0)."""
    with RawConnection(bootstrap) as conn:
        body = conn.roundtrip(frame(request_header_v1(request.API_KEY, version, 7, client_id)
                                    + request.encode(version)))
    (correlation_id,) = struct.unpack(">i", body[:4])
    assert correlation_id == 7
    return response_cls.decode(body, version, 4)


def alter_quotas(bootstrap: str, entity: dict[str, str | None], ops: dict[str, float | None],
                 validate_only: bool = False) -> AlterClientQuotasResponse:
    A = AlterClientQuotasRequest
    request = A(entries=[A.EntryData(
        entity=[A.EntityData(entity_type=t, entity_name=n) for t, n in entity.items()],
        ops=[A.OpData(key=k, value=0.0 if v is None else float(v), remove=v is None) for k, v in ops.items()])],
        validate_only=validate_only)
    return _roundtrip(bootstrap, request, AlterClientQuotasResponse)


def describe_quotas(bootstrap: str, components: list[tuple[str, int, str | None]],
                    strict: bool = False) -> DescribeClientQuotasResponse:
    D = DescribeClientQuotasRequest
    request = D(components=[D.ComponentData(entity_type=t, match_type=m, match=n) for t, m, n in components],
                strict=strict)
    return _roundtrip(bootstrap, request, DescribeClientQuotasResponse)


def described(response: DescribeClientQuotasResponse) -> dict[tuple, dict[str, float]]:
    assert response.error_code == 0, response.error_message
    return {tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
            for entry in response.entries}


# ---------------------------------------------------------------- clients

class ProducerRun:
    """A producer writing VALUE as fast as librdkafka takes it for `seconds` (or until `max_bytes`
    are queued, to spare the disk), in a thread."""

    def __init__(self, bootstrap: str, client_id: str, seconds: float, max_bytes: int = 200_000_000):
        self.max_bytes = max_bytes
        self.throttles: list[int] = []
        self.deliveries: list[tuple[float, int]] = []
        self.seconds = seconds
        self.producer = Producer({
            "bootstrap.servers": bootstrap, "client.id": client_id, "acks": 1, "linger.ms": 5,
            # small requests: a throttle is computed after a request is taken, so each request may
            # overshoot the quota by its own size (Kafka's arithmetic); 64 KiB batches keep that small
            "batch.size": 65536, "max.in.flight.requests.per.connection": 5,
            "queue.buffering.max.kbytes": 16384, "compression.type": "none",
            "throttle_cb": lambda event: self.throttles.append(event.throttle_time * 1000 if isinstance(
                event.throttle_time, float) else event.throttle_time),
        })
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, err, msg) -> None:
        if err is None:
            self.deliveries.append((time.monotonic(), len(msg.value())))

    def _run(self) -> None:
        self.started = time.monotonic()
        end = self.started + self.seconds
        queued = 0
        while time.monotonic() < end:
            if queued >= self.max_bytes:
                self.producer.poll(0.05)
                if len(self.producer) == 0:
                    break
                continue
            try:
                self.producer.produce(TOPIC, VALUE, on_delivery=self._delivered)
                queued += len(VALUE)
                self.producer.poll(0)
            except BufferError:
                self.producer.poll(0.02)
        self.ended = time.monotonic()
        self.producer.poll(0)
        self.producer.purge()
        self.producer.flush(3)
        self.producer = None

    def rate(self, window: float | None = None) -> float:
        """Bytes/s delivered over the first `window` seconds (default: the whole run)."""
        end = self.ended if window is None else min(self.ended, self.started + window)
        done = sum(size for at, size in self.deliveries if at <= end)
        return done / (end - self.started)


def consume_rate(bootstrap: str, client_id: str, seconds: float, stop_at_bytes: int | None = None) -> tuple[
        float, int, list[int]]:
    """(bytes/s, bytes, throttle times) of a consumer reading TOPIC from the start for `seconds`."""
    throttles: list[int] = []
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "client.id": client_id, "group.id": f"g-{client_id}-{time.time()}",
        "auto.offset.reset": "earliest", "enable.auto.commit": False, "max.partition.fetch.bytes": 262144,
        "fetch.max.bytes": 1048576, "throttle_cb": lambda event: throttles.append(event.throttle_time),
    })
    consumer.subscribe([TOPIC])
    got = 0
    first = None
    end = time.monotonic() + 30  # the first record may take a rebalance
    try:
        while time.monotonic() < end:
            for msg in consumer.consume(500, 0.2):
                if msg.error() is None:
                    if first is None:
                        first = time.monotonic()
                        end = first + seconds
                    got += len(msg.value())
            if stop_at_bytes is not None and got >= stop_at_bytes:
                break
    finally:
        consumer.close()
    assert first is not None, "no record consumed"
    return got / (time.monotonic() - first), got, throttles


# ---------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def broker():
    with start_broker() as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        for future in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)]).values():
            future.result(30)
        yield b


# ---------------------------------------------------------------- tests

def test_alter_and_describe_client_quotas(broker):
    bootstrap = broker.bootstrap
    assert described(describe_quotas(bootstrap, [])) == {}
    # validate_only stores nothing
    response = alter_quotas(bootstrap, {"client-id": "v"}, {"producer_byte_rate": 1000}, validate_only=True)
    assert response.entries[0].error_code == 0
    assert described(describe_quotas(bootstrap, [])) == {}
    # Kafka's INVALID_REQUEST cases: unknown key, fractional byte rate, unsupported entity type
    assert alter_quotas(bootstrap, {"client-id": "v"}, {"nope": 1}).entries[0].error_code == 42
    assert alter_quotas(bootstrap, {"client-id": "v"}, {"producer_byte_rate": 1.5}).entries[0].error_code == 42
    assert alter_quotas(bootstrap, {"group": "v"}, {"producer_byte_rate": 1}).entries[0].error_code == 42

    assert alter_quotas(bootstrap, {"user": "alice", "client-id": None},
                        {"consumer_byte_rate": 2000, "request_percentage": 50}).entries[0].error_code == 0
    assert alter_quotas(bootstrap, {"user": None}, {"producer_byte_rate": 3000}).entries[0].error_code == 0
    everything = described(describe_quotas(bootstrap, []))
    assert everything == {
        (("client-id", None), ("user", "alice")): {"consumer_byte_rate": 2000.0, "request_percentage": 50.0},
        (("user", None),): {"producer_byte_rate": 3000.0},
    }
    # match_type 0 exact, 1 default, 2 any; strict leaves out entities with other components
    assert set(described(describe_quotas(bootstrap, [("user", 0, "alice")]))) == {
        (("client-id", None), ("user", "alice"))}
    assert described(describe_quotas(bootstrap, [("user", 0, "alice")], strict=True)) == {}
    assert set(described(describe_quotas(bootstrap, [("user", 1, None)]))) == {(("user", None),)}
    assert set(described(describe_quotas(bootstrap, [("user", 2, None)]))) == set(everything)
    assert set(described(describe_quotas(bootstrap, [("user", 2, None), ("client-id", 1, None)], strict=True))) == {
        (("client-id", None), ("user", "alice"))}
    assert describe_quotas(bootstrap, [("user", 0, None)]).error_code == 42

    assert alter_quotas(bootstrap, {"user": "alice", "client-id": None},
                        {"consumer_byte_rate": None, "request_percentage": None}).entries[0].error_code == 0
    assert alter_quotas(bootstrap, {"user": None}, {"producer_byte_rate": None}).entries[0].error_code == 0
    assert described(describe_quotas(bootstrap, [])) == {}


def test_producer_byte_rate(broker):
    bootstrap = broker.bootstrap
    assert alter_quotas(bootstrap, {"client-id": "limited"}, {"producer_byte_rate": QUOTA}).entries[0].error_code == 0
    assert described(describe_quotas(bootstrap, [("client-id", 0, "limited")])) == {
        (("client-id", "limited"),): {"producer_byte_rate": float(QUOTA)}}
    limited = ProducerRun(bootstrap, "limited", RUN_S)
    other = ProducerRun(bootstrap, "unlimited", RUN_S / 2, max_bytes=100 * QUOTA)
    limited.thread.start()
    other.thread.start()
    limited.thread.join(RUN_S + 15)
    other.thread.join(5)
    print(f"\nlimited producer: {limited.rate(MEASURE_S) / 1e6:.2f} MB/s over {MEASURE_S:.0f} s, "
          f"{len(limited.throttles)} "
          f"throttle reports (max {max(limited.throttles, default=0)} ms); unrelated producer at the same time: "
          f"{other.rate() / 1e6:.2f} MB/s, {len(other.throttles)} throttle reports")
    assert 0.7 * QUOTA <= limited.rate(MEASURE_S) <= 1.4 * QUOTA
    assert limited.throttles and max(limited.throttles) > 0
    assert other.rate() >= 3 * QUOTA
    assert not [t for t in other.throttles if t > 0]

    # removing the quota lifts the limit (a new producer: librdkafka also backs off by itself)
    assert alter_quotas(bootstrap, {"client-id": "limited"}, {"producer_byte_rate": None}).entries[0].error_code == 0
    assert described(describe_quotas(bootstrap, [])) == {}
    again = ProducerRun(bootstrap, "limited", 4, max_bytes=40 * QUOTA)
    again.thread.start()
    again.thread.join(20)
    print(f"limited producer after the quota was removed: {again.rate() / 1e6:.2f} MB/s")
    assert again.rate() >= 3 * QUOTA


def test_consumer_byte_rate(broker):
    bootstrap = broker.bootstrap
    # enough data for the limited consumer's whole run at ~1.4 MB/s
    fill = ProducerRun(bootstrap, "filler", 10, max_bytes=40 * QUOTA)
    fill.thread.start()
    fill.thread.join(25)
    assert alter_quotas(bootstrap, {"client-id": "limited-consumer"},
                        {"consumer_byte_rate": QUOTA}).entries[0].error_code == 0
    result: dict[str, tuple] = {}
    limited = threading.Thread(target=lambda: result.setdefault(
        "limited", consume_rate(bootstrap, "limited-consumer", MEASURE_S)))
    limited.start()
    time.sleep(2)
    result["other"] = consume_rate(bootstrap, "other-consumer", 5, stop_at_bytes=20 * QUOTA)
    limited.join(45)
    rate, got, throttles = result["limited"]
    other_rate, other_got, other_throttles = result["other"]
    print(f"\nlimited consumer: {rate / 1e6:.2f} MB/s ({got / 1e6:.1f} MB in {MEASURE_S:.0f} s), {len(throttles)} "
          f"throttle reports; unrelated consumer at the same time: {other_rate / 1e6:.2f} MB/s "
          f"({other_got / 1e6:.1f} MB)")
    assert 0.7 * QUOTA <= rate <= 1.4 * QUOTA
    assert throttles and max(throttles) > 0
    assert other_rate >= 3 * QUOTA
    assert alter_quotas(bootstrap, {"client-id": "limited-consumer"},
                        {"consumer_byte_rate": None}).entries[0].error_code == 0


# ---------------------------------------------------------------- cluster mode: ZooKeeper

cluster2 = cluster_fixture(2)


def _znode(zk, path: str) -> dict:
    return json.loads(zk.get(path)[0])


def _produce_throttle_ms(bootstrap: str, client_id: str, topic: str, size: int) -> tuple[int, int]:
    """(error code, throttle_time_ms) of a Produce v3 of one `size`-byte record."""
    P = ProduceRequest
    request = P(transactional_id=None, acks=1, timeout_ms=10_000, topic_data=[P.TopicProduceData(
        name=topic, partition_data=[P.PartitionProduceData(index=0, records=encode_batch([(None, b"x" * size)]))])])
    response = _roundtrip(bootstrap, request, ProduceResponse, version=3, client_id=client_id)
    return response.responses[0].partition_responses[0].error_code, response.throttle_time_ms


def test_cluster_quotas_live_in_zookeeper_and_apply_on_every_broker(cluster2):
    kazoo = pytest.importorskip("kazoo.client")
    one, two = cluster2.broker(1), cluster2.broker(2)
    tag = uuid.uuid4().hex[:8]
    client, user = f"zk-limited-{tag}", f"CN=app {tag}"
    assert alter_quotas(one.bootstrap, {"client-id": client}, {"producer_byte_rate": 1000}).entries[0].error_code == 0
    assert alter_quotas(one.bootstrap, {"user": user, "client-id": None},
                        {"consumer_byte_rate": 2000}).entries[0].error_code == 0
    wanted = {(("client-id", client),): {"producer_byte_rate": 1000.0},
              (("client-id", None), ("user", user)): {"consumer_byte_rate": 2000.0}}
    wait_until(lambda: described(describe_quotas(two.bootstrap, [])) == wanted, timeout=30,
               message="broker 2 describes the quotas set through broker 1")

    zk = kazoo.KazooClient(hosts=cluster2.zookeeper_connect)
    zk.start(timeout=10)
    try:
        # what Kafka 3.7 would have written
        assert _znode(zk, f"/config/clients/{client}") == {"version": 1, "config": {"producer_byte_rate": "1000"}}
        assert _znode(zk, f"/config/users/CN%3Dapp%20{tag}/clients/<default>") == {
            "version": 1, "config": {"consumer_byte_rate": "2000"}}
        changes = [_znode(zk, f"/config/changes/{c}") for c in zk.get_children("/config/changes")]
        assert {"version": 2, "entity_path": f"clients/{client}"} in changes
        assert {"version": 2, "entity_path": f"users/CN%3Dapp%20{tag}/clients/<default>"} in changes
        # an older kafka-configs --zookeeper writes the znode and the notification itself
        zk.create("/config/users/<default>", json.dumps(
            {"version": 1, "config": {"request_percentage": "400"}}).encode(), makepath=True)
        zk.create("/config/changes/config_change_", json.dumps(
            {"version": 2, "entity_path": "users/<default>"}).encode(), sequence=True)
    finally:
        zk.stop()
        zk.close()
    wanted[(("user", None),)] = {"request_percentage": 400.0}
    for number, node in ((1, one), (2, two)):
        wait_until(lambda: described(describe_quotas(node.bootstrap, [])) == wanted, timeout=30,
                   message=f"broker {number} applies a quota written straight to ZooKeeper")

    # broker 2 enforces the quota set through broker 1: 20 kB is two quota windows' worth
    topic = f"zk-quota-{tag}"
    admin = AdminClient({"bootstrap.servers": one.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[2]])])[topic].result(30)
    wait_until(lambda: _produce_throttle_ms(two.bootstrap, "someone-else", topic, 100)[0] == 0, timeout=30,
               message="broker 2 leads the new topic")
    assert _produce_throttle_ms(two.bootstrap, "someone-else", topic, 20_000) == (0, 0)
    error, throttle = _produce_throttle_ms(two.bootstrap, client, topic, 20_000)
    assert error == 0 and throttle > 5_000  # ~(2000 - 1000) / 1000 * 10 s

    for entity, key in [({"client-id": client}, "producer_byte_rate"),
                        ({"user": user, "client-id": None}, "consumer_byte_rate"),
                        ({"user": None}, "request_percentage")]:
        assert alter_quotas(two.bootstrap, entity, {key: None}).entries[0].error_code == 0
    for number, node in ((1, one), (2, two)):
        wait_until(lambda: described(describe_quotas(node.bootstrap, [])) == {}, timeout=30,
                   message=f"broker {number} sees every quota removed")
