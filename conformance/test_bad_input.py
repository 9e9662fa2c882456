"""Malformed input on raw sockets: the broker rejects it the way Kafka does and keeps serving.

After every case a fresh client must still work and the records produced at the start of
the module must read back unchanged. Requests are built by hand (conformance/kafka_wire.py).
"""

from __future__ import annotations

import random
import socket
import struct
import time

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka", reason="!!! confluent-kafka not installed: pip install -e '.[test]'")

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from conformance.broker_process import BrokerProcess  # noqa: E402
from conformance.kafka_wire import (  # noqa: E402
    API_API_VERSIONS,
    API_METADATA,
    ConnectionClosed,
    RawConnection,
    api_versions_request,
    encode_batch,
    frame,
    metadata_request,
    parse_api_versions_v0,
    parse_produce_v3,
    produce_request_v3,
    request_header_v1,
)

pytestmark = pytest.mark.timeout(90)

UNSUPPORTED_VERSION = 35
CORRUPT_MESSAGE = 2
DEFAULT_MAX_REQUEST_BYTES = 104_857_600   # socket.request.max.bytes default
SEEDED_RECORDS = [(b"key-%d" % i, b"value-%d-" % i + bytes(range(256)) * (i % 3)) for i in range(50)]


# ---------------------------------------------------------------- helpers

def create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=10).values():
        fut.result(timeout=30)
    deadline = time.monotonic() + 20
    while True:
        meta = admin.list_topics(name, timeout=10).topics.get(name)
        if meta is not None and meta.error is None and all(p.leader >= 0 for p in meta.partitions.values()):
            return
        assert time.monotonic() < deadline, f"topic {name} not in metadata"
        time.sleep(0.2)


def read_partition(bootstrap: str, topic: str, partition: int = 0, timeout: float = 20) -> list[tuple[bytes, bytes]]:
    """All records of one partition, from offset 0 to the high watermark."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kafkapy-bad-input-check",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    try:
        high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1]
        consumer.assign([TopicPartition(topic, partition, 0)])
        out: list[tuple[bytes, bytes]] = []
        deadline = time.monotonic() + timeout
        while len(out) < high:
            assert time.monotonic() < deadline, f"read {len(out)}/{high} records of {topic}[{partition}]"
            for msg in consumer.consume(num_messages=1000, timeout=0.5):
                assert msg.error() is None, msg.error()
                out.append((msg.key(), msg.value()))
        return out
    finally:
        consumer.close()


def observe(conn: RawConnection, timeout: float = 10.0) -> bytes | None:
    """The next response body, or None if the broker closed the connection. Fails on silence."""
    conn.sock.settimeout(timeout)
    try:
        return conn.receive()
    except ConnectionClosed:
        return None
    except socket.timeout:
        raise AssertionError(f"broker neither answered nor closed the connection within {timeout} s") from None


def api_versions_ok(bootstrap: str) -> None:
    with RawConnection(bootstrap) as conn:
        response = parse_api_versions_v0(conn.roundtrip(api_versions_request(0, correlation_id=77)))
    assert response.correlation_id == 77 and response.error_code == 0


@pytest.fixture(scope="module")
def seeded_topic(broker) -> str:
    """A topic holding SEEDED_RECORDS, produced through a normal client before any bad input."""
    topic = f"bad-input-seed-{int(time.time() * 1000)}"
    create_topic(broker.bootstrap, topic)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 5})
    for key, value in SEEDED_RECORDS:
        producer.produce(topic, value=value, key=key, partition=0)
    assert producer.flush(30) == 0
    assert read_partition(broker.bootstrap, topic) == SEEDED_RECORDS
    return topic


@pytest.fixture
def healthy_after(broker, seeded_topic):
    """Runs the test, then checks the broker still serves new clients with intact data."""
    yield
    if isinstance(broker, BrokerProcess):
        assert broker.is_running(), f"broker process died:\n{broker.stderr_tail()}"
    api_versions_ok(broker.bootstrap)
    assert read_partition(broker.bootstrap, seeded_topic) == SEEDED_RECORDS


# ---------------------------------------------------------------- cases

@pytest.mark.parametrize("payload", [
    pytest.param(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n", id="http-request"),
    pytest.param(bytes.fromhex("160301020001000001fc0303") + bytes(500), id="tls-client-hello"),
    pytest.param(b"\xff\xff\xff\xff" + bytes(64), id="negative-size"),
    pytest.param(b"\x80\x00\x00\x00" + bytes(64), id="min-int-size"),
])
def test_nonsense_size_prefix_closes_connection(broker, healthy_after, payload):
    with RawConnection(broker.bootstrap) as conn:
        conn.send(payload)
        assert observe(conn) is None, "a frame size outside 0..socket.request.max.bytes must close the connection"


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_garbage_frame(broker, healthy_after, seed):
    """A well-sized frame full of random bytes: the broker closes (or answers), never hangs or dies."""
    body = random.Random(seed).randbytes(4092)
    with RawConnection(broker.bootstrap) as conn:
        conn.send(frame(body))
        observe(conn)


def test_zero_length_frame(broker, healthy_after):
    with RawConnection(broker.bootstrap) as conn:
        conn.send(struct.pack(">i", 0))
        assert observe(conn) is None, "an empty request has no header: the connection must close"


def test_truncated_frame_then_close(broker, healthy_after):
    request = metadata_request(1, correlation_id=5, topics=None)
    with RawConnection(broker.bootstrap) as conn:
        conn.send(request[: len(request) // 2])
    # A half-sent frame on an idle connection must not stall other clients either.
    idle = RawConnection(broker.bootstrap)
    try:
        idle.send(struct.pack(">i", 1000) + b"\x00\x03")
        api_versions_ok(broker.bootstrap)
    finally:
        idle.close()


def test_frame_over_default_request_limit_closes(broker, healthy_after):
    """A size above socket.request.max.bytes (default 100 MiB) is refused on the size alone."""
    with RawConnection(broker.bootstrap) as conn:
        conn.send(struct.pack(">i", DEFAULT_MAX_REQUEST_BYTES + 1) + request_header_v1(API_METADATA, 1, 9) + bytes(1000))
        assert observe(conn) is None


def test_frame_over_configured_request_limit_closes(broker_factory):
    node = broker_factory({"socket.request.max.bytes": "1024"})
    with RawConnection(node.bootstrap) as conn:
        small = api_versions_request(0, correlation_id=1)
        assert parse_api_versions_v0(conn.roundtrip(small)).error_code == 0
        big_body = request_header_v1(API_METADATA, 1, 2) + struct.pack(">i", 1) + struct.pack(">h", 2000) + b"t" * 2000
        conn.send(frame(big_body))
        assert observe(conn) is None, "a request over socket.request.max.bytes must close the connection"
    assert node.is_running()
    api_versions_ok(node.bootstrap)


def test_unknown_api_key(broker, healthy_after):
    with RawConnection(broker.bootstrap) as conn:
        conn.send(frame(request_header_v1(9999, 0, 11) + bytes(16)))
        response = observe(conn)
    if response is not None:   # Kafka closes; an error response naming our correlation id is tolerable
        assert struct.unpack_from(">i", response)[0] == 11


def test_metadata_unsupported_version(broker, healthy_after):
    with RawConnection(broker.bootstrap) as conn:
        conn.send(metadata_request(99, correlation_id=12, topics=None))
        response = observe(conn)
    if response is not None:
        correlation_id, error_code = struct.unpack_from(">ih", response)
        assert correlation_id == 12 and error_code == UNSUPPORTED_VERSION


def test_api_versions_unsupported_version(broker, healthy_after):
    """ApiVersions v99 gets a v0-layout answer: UNSUPPORTED_VERSION plus the supported ranges."""
    with RawConnection(broker.bootstrap) as conn:
        body = request_header_v1(API_API_VERSIONS, 99, 13) + bytes(8)
        response = parse_api_versions_v0(conn.roundtrip(frame(body)))
        assert response.correlation_id == 13
        assert response.error_code == UNSUPPORTED_VERSION
        assert API_API_VERSIONS in response.ranges, "the ranges must list ApiVersions itself"
        low, high = response.ranges[API_API_VERSIONS]
        assert low == 0 and high >= 3
        # The client retries on the same connection with a version it now knows is supported.
        retry = parse_api_versions_v0(conn.roundtrip(api_versions_request(0, correlation_id=14)))
        assert retry.correlation_id == 14 and retry.error_code == 0
        assert retry.ranges == response.ranges


def test_produce_with_bad_crc(broker, healthy_after, topic_name):
    create_topic(broker.bootstrap, topic_name)
    good = encode_batch([(b"good-key", b"good-value"), (None, b"second")])
    bad = encode_batch([(b"bad-key", b"bad-value")], corrupt_crc=True)
    with RawConnection(broker.bootstrap) as conn:
        correlation_id, results = parse_produce_v3(conn.roundtrip(produce_request_v3(21, topic_name, 0, good)))
        assert correlation_id == 21
        assert [(r.topic, r.partition, r.error_code, r.base_offset) for r in results] == [(topic_name, 0, 0, 0)]

        correlation_id, results = parse_produce_v3(conn.roundtrip(produce_request_v3(22, topic_name, 0, bad)))
        assert correlation_id == 22
        assert [(r.topic, r.partition, r.error_code) for r in results] == [(topic_name, 0, CORRUPT_MESSAGE)]

        # The connection stays usable after a rejected batch.
        correlation_id, results = parse_produce_v3(conn.roundtrip(produce_request_v3(23, topic_name, 0, good)))
        assert correlation_id == 23 and results[0].error_code == 0 and results[0].base_offset == 2
    records = read_partition(broker.bootstrap, topic_name)
    assert records == [(b"good-key", b"good-value"), (None, b"second")] * 2, "the corrupt batch must not be stored"
