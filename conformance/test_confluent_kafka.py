"""confluent-kafka (librdkafka) against a real broker: admin, idempotent produce, consume, restart."""

from __future__ import annotations

import signal
import time
import uuid

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka", reason="!!! confluent-kafka not installed: pip install -e '.[test]'")

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from conformance import kafka_wire  # noqa: E402
from conformance.message_corpus import MessageCorpus  # noqa: E402

pytestmark = pytest.mark.timeout(180)

CODECS = ["gzip", "snappy", "lz4", "zstd"]
MESSAGES_PER_CODEC = 100_000
PARTITIONS = 3
ADMIN_TIMEOUT_S = 30


# ---------------------------------------------------------------- helpers

def admin_client(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "client.id": "kafkapy-conformance-admin"})


def wait_all(futures: dict, timeout: float = ADMIN_TIMEOUT_S) -> dict:
    return {key: fut.result(timeout=timeout) for key, fut in futures.items()}


def create_topic(bootstrap: str, name: str, partitions: int = PARTITIONS, config: dict | None = None) -> None:
    admin = admin_client(bootstrap)
    wait_all(admin.create_topics([NewTopic(name, partitions, 1, config=config or {})], operation_timeout=10))
    wait_for_topic(admin, name, partitions)


def wait_for_topic(admin: AdminClient, name: str, partitions: int, timeout: float = 20) -> None:
    """Wait until metadata shows the topic with all partitions led by a broker."""
    deadline = time.monotonic() + timeout
    while True:
        meta = admin.list_topics(name, timeout=10).topics.get(name)
        if meta is not None and meta.error is None and len(meta.partitions) == partitions and all(
            p.leader >= 0 for p in meta.partitions.values()
        ):
            return
        assert time.monotonic() < deadline, f"topic {name} not ready in metadata: {meta}"
        time.sleep(0.2)


def idempotent_producer(bootstrap: str, **extra: object) -> Producer:
    config = {
        "bootstrap.servers": bootstrap,
        "client.id": "kafkapy-conformance-producer",
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 20,
        "batch.num.messages": 10_000,
        "batch.size": 1_000_000,
        "queue.buffering.max.messages": 500_000,
        "queue.buffering.max.kbytes": 1_048_576,
        "message.timeout.ms": 60_000,
    }
    config.update(extra)
    return Producer(config)


def assigned_consumer(bootstrap: str) -> Consumer:
    # group.id is required by the binding; assign() never joins the group and nothing is committed.
    return Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"kafkapy-conformance-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "error",
        "fetch.wait.max.ms": 100,
        "enable.partition.eof": False,
    })


class DeliveryLog:
    """Collects the outcome of every produce() through its delivery callback."""

    def __init__(self) -> None:
        self.acked: list[tuple[int, int, int]] = []   # (partition, offset, index)
        self.errors: list[str] = []

    def callback(self, index: int):
        def on_delivery(err, msg):
            if err is not None:
                self.errors.append(f"message {index}: {err}")
            else:
                self.acked.append((msg.partition(), msg.offset(), index))
        return on_delivery


def produce_corpus(producer: Producer, topic: str, corpus: MessageCorpus, indexes: range, log: DeliveryLog,
                   partitions: int = PARTITIONS) -> None:
    """Produce corpus messages `indexes`, message i to partition i % partitions, and wait for all acks."""
    for i in indexes:
        m = corpus.message(i)
        while True:
            try:
                producer.produce(topic, value=m.value, key=m.key, headers=m.headers or None,
                                 partition=i % partitions, timestamp=m.timestamp_ms, on_delivery=log.callback(i))
                break
            except BufferError:
                producer.poll(0.05)
        if i % 5000 == 0:
            producer.poll(0)
    remaining = producer.flush(60)
    assert remaining == 0, f"{remaining} messages still unacknowledged after 60 s"


def consume_exact(consumer: Consumer, expected_count: int, timeout: float = 60) -> list:
    """Consume until `expected_count` messages arrived; fail on any error message or timeout."""
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < expected_count:
        assert time.monotonic() < deadline, f"consumed only {len(out)}/{expected_count} messages in {timeout} s"
        for msg in consumer.consume(num_messages=10_000, timeout=0.5):
            if msg.error() is not None:
                raise AssertionError(f"consumer error: {msg.error()}")
            out.append(msg)
    return out


def assert_message_matches(msg, corpus: MessageCorpus, index: int) -> None:
    expected = corpus.message(index)
    where = f"{msg.topic()}[{msg.partition()}]@{msg.offset()} (message {index})"
    assert msg.key() == expected.key, f"key differs at {where}"
    assert msg.value() == expected.value, f"value differs at {where}"
    assert (msg.headers() or []) == expected.headers, f"headers differ at {where}"
    ts_type, ts = msg.timestamp()
    assert ts_type == confluent_kafka.TIMESTAMP_CREATE_TIME, f"timestamp type {ts_type} at {where}"
    assert ts == expected.timestamp_ms, f"timestamp differs at {where}"


def high_watermarks(consumer: Consumer, topic: str, partitions: int) -> list[int]:
    return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)]


def init_producer_id(bootstrap: str) -> int:
    """Allocate a producer id with a raw InitProducerId (non-transactional)."""
    error_code, producer_id, epoch = kafka_wire.init_producer_id(bootstrap)
    assert error_code == 0, f"InitProducerId failed with error {error_code}"
    assert producer_id >= 0 and epoch >= 0
    return producer_id


# ---------------------------------------------------------------- admin

def test_create_describe_delete_topic(broker, topic_name):
    admin = admin_client(broker.bootstrap)
    config = {"retention.ms": "3600000", "cleanup.policy": "delete", "max.message.bytes": "2000000"}
    result = wait_all(admin.create_topics([NewTopic(topic_name, 3, 1, config=config)], operation_timeout=10))
    assert result == {topic_name: None}
    wait_for_topic(admin, topic_name, 3)

    meta = admin.list_topics(topic_name, timeout=10)
    broker_ids = set(meta.brokers)
    topic = meta.topics[topic_name]
    assert sorted(topic.partitions) == [0, 1, 2]
    for part in topic.partitions.values():
        assert part.leader in broker_ids
        assert part.replicas == [part.leader] and part.isrs == [part.leader]

    # The same topic again is TOPIC_ALREADY_EXISTS (36), not silently accepted.
    with pytest.raises(KafkaException) as exc_info:
        wait_all(admin.create_topics([NewTopic(topic_name, 3, 1)], operation_timeout=10))
    assert exc_info.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS

    # Deleting makes the topic disappear from metadata.
    assert wait_all(admin.delete_topics([topic_name], operation_timeout=10)) == {topic_name: None}
    deadline = time.monotonic() + 20
    while topic_name in admin.list_topics(timeout=10).topics:
        assert time.monotonic() < deadline, "deleted topic still listed after 20 s"
        time.sleep(0.2)


def test_describe_topics_api(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=2)
    admin = admin_client(broker.bootstrap)
    descriptions = wait_all(admin.describe_topics(confluent_kafka.TopicCollection([topic_name])))
    desc = descriptions[topic_name]
    assert desc.name == topic_name
    assert not desc.is_internal
    assert [p.id for p in desc.partitions] == [0, 1]
    assert all(p.leader is not None for p in desc.partitions)


def test_create_topic_validate_only_and_invalid(broker, topic_name):
    admin = admin_client(broker.bootstrap)
    # validate_only: accepted but not created.
    assert wait_all(admin.create_topics([NewTopic(topic_name, 1, 1)], validate_only=True)) == {topic_name: None}
    time.sleep(0.5)
    assert topic_name not in admin.list_topics(timeout=10).topics

    # An invalid config value is INVALID_CONFIG (40).
    with pytest.raises(KafkaException) as exc_info:
        wait_all(admin.create_topics([NewTopic(topic_name, 1, 1, config={"cleanup.policy": "no-such-policy"})]))
    assert exc_info.value.args[0].code() == KafkaError.INVALID_CONFIG

    # Replication factor larger than the one-broker cluster: INVALID_REPLICATION_FACTOR (38).
    with pytest.raises(KafkaException) as exc_info:
        wait_all(admin.create_topics([NewTopic(topic_name, 1, 3)]))
    assert exc_info.value.args[0].code() == KafkaError.INVALID_REPLICATION_FACTOR

    # Deleting an unknown topic: UNKNOWN_TOPIC_OR_PARTITION (3).
    with pytest.raises(KafkaException) as exc_info:
        wait_all(admin.delete_topics([topic_name + "-missing"], operation_timeout=10))
    assert exc_info.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_describe_and_alter_topic_configs(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=1, config={"retention.ms": "3600000"})
    admin = admin_client(broker.bootstrap)
    resource = ConfigResource(ResourceType.TOPIC, topic_name)

    entries = wait_all(admin.describe_configs([resource]))[resource]
    retention = entries["retention.ms"]
    assert retention.value == "3600000"
    assert retention.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert not retention.is_default
    segment_bytes = entries["segment.bytes"]
    assert segment_bytes.value == "1073741824" and segment_bytes.is_default
    assert entries["cleanup.policy"].value == "delete"

    wait_all(admin.incremental_alter_configs([ConfigResource(
        ResourceType.TOPIC, topic_name,
        incremental_configs=[
            ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET),
        ],
    )]))
    entries = wait_all(admin.describe_configs([resource]))[resource]
    assert entries["retention.ms"].value == "7200000"
    assert entries["cleanup.policy"].value == "compact"

    # DELETE reverts to the default (log.retention.hours=168 -> 604800000 ms).
    wait_all(admin.incremental_alter_configs([ConfigResource(
        ResourceType.TOPIC, topic_name,
        incremental_configs=[ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)],
    )]))
    entries = wait_all(admin.describe_configs([resource]))[resource]
    assert entries["retention.ms"].value == "604800000"
    assert entries["retention.ms"].is_default


def test_describe_broker_configs(broker):
    admin = admin_client(broker.bootstrap)
    broker_id = next(iter(admin.list_topics(timeout=10).brokers))
    resource = ConfigResource(ResourceType.BROKER, str(broker_id))
    entries = wait_all(admin.describe_configs([resource]))[resource]
    for name in ("num.partitions", "auto.create.topics.enable", "log.retention.hours", "message.max.bytes"):
        assert name in entries, f"broker config {name} missing from DescribeConfigs"


def test_create_partitions(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=1)
    admin = admin_client(broker.bootstrap)
    wait_all(admin.create_partitions([NewPartitions(topic_name, 4)], operation_timeout=10))
    wait_for_topic(admin, topic_name, 4)


# ---------------------------------------------------------------- produce / consume

@pytest.mark.parametrize("codec", CODECS)
def test_idempotent_produce_consume_by_timestamp(broker, topic_name, codec):
    """100,000 messages per codec: all acked in order, read back byte-exact via offsets_for_times."""
    create_topic(broker.bootstrap, topic_name)
    base_ts = int(time.time() * 1000) - 3_600_000   # an hour ago: inside retention, unlike "now"
    corpus = MessageCorpus(seed=CODECS.index(codec) + 1, base_timestamp_ms=base_ts)

    log = DeliveryLog()
    producer = idempotent_producer(broker.bootstrap, **{"compression.type": codec})
    produce_corpus(producer, topic_name, corpus, range(MESSAGES_PER_CODEC), log)
    assert log.errors == []
    assert len(log.acked) == MESSAGES_PER_CODEC
    # Idempotence + one partition per i % 3: offsets are exactly i // 3, no gaps, no duplicates.
    wrong = [(p, o, i) for p, o, i in log.acked if (p, o) != (i % PARTITIONS, i // PARTITIONS)]
    assert wrong[:5] == [], f"{len(wrong)} messages acked at unexpected offsets"

    consumer = assigned_consumer(broker.bootstrap)
    try:
        per_partition = [len(range(p, MESSAGES_PER_CODEC, PARTITIONS)) for p in range(PARTITIONS)]
        assert high_watermarks(consumer, topic_name, PARTITIONS) == per_partition

        # offsets_for_times: the earliest offset whose timestamp >= the target. One call per
        # target: a partition may appear only once in a ListOffsets request.
        def lookup(timestamps: list[int]) -> list[int]:
            found = consumer.offsets_for_times(
                [TopicPartition(topic_name, p, ts) for p, ts in enumerate(timestamps)], timeout=15)
            for tp in found:
                assert tp.error is None, f"offsets_for_times error {tp.error} for {tp}"
            return [tp.offset for tp in sorted(found, key=lambda tp: tp.partition)]

        mid_index = MESSAGES_PER_CODEC // 2 + 1
        start_offsets = lookup([base_ts] * PARTITIONS)
        mid_offsets = lookup([base_ts + mid_index] * PARTITIONS)
        past_end = lookup([base_ts + MESSAGES_PER_CODEC + 1000])
        assert start_offsets == [0] * PARTITIONS
        # First index i >= mid_index with i % 3 == p lives at offset i // 3.
        expected_mid = [(mid_index + ((p - mid_index) % PARTITIONS)) // PARTITIONS for p in range(PARTITIONS)]
        assert mid_offsets == expected_mid
        assert past_end == [-1], "a timestamp past the last message must give offset -1"

        # Everything, from the offsets found for the first timestamp.
        consumer.assign([TopicPartition(topic_name, p, o) for p, o in enumerate(start_offsets)])
        messages = consume_exact(consumer, MESSAGES_PER_CODEC)
        assert len(messages) == MESSAGES_PER_CODEC
        seen = set()
        for msg in messages:
            index = msg.offset() * PARTITIONS + msg.partition()
            assert (msg.partition(), msg.offset()) not in seen, f"duplicate delivery of {msg.partition()}@{msg.offset()}"
            seen.add((msg.partition(), msg.offset()))
            assert_message_matches(msg, corpus, index)

        # From the middle: the first message of each partition is the one the timestamp named.
        consumer.assign([TopicPartition(topic_name, p, o) for p, o in enumerate(mid_offsets)])
        firsts: dict[int, object] = {}
        deadline = time.monotonic() + 30
        while len(firsts) < PARTITIONS:
            assert time.monotonic() < deadline, "no messages after seeking to the timestamp offsets"
            for msg in consumer.consume(num_messages=1000, timeout=0.5):
                assert msg.error() is None, msg.error()
                firsts.setdefault(msg.partition(), msg)
        for p, msg in firsts.items():
            assert msg.offset() == mid_offsets[p]
            assert_message_matches(msg, corpus, msg.offset() * PARTITIONS + p)
            assert msg.timestamp()[1] >= base_ts + mid_index
    finally:
        consumer.close()


# ---------------------------------------------------------------- restart

@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_restart_keeps_topics_and_acknowledged_records(broker_factory, stop_signal):
    """Every topic and every acknowledged record survives a restart; producer ids are never reused."""
    node = broker_factory()
    topics = {"restart-three": 3, "restart-one": 1}
    for name, partitions in topics.items():
        create_topic(node.bootstrap, name, partitions=partitions, config={"retention.ms": "86400000"})

    base_ts = int(time.time() * 1000) - 60_000
    corpus = MessageCorpus(seed=99, base_timestamp_ms=base_ts)
    first = range(0, 20_000)
    log = DeliveryLog()
    producer = idempotent_producer(node.bootstrap, **{"compression.type": "lz4"})
    produce_corpus(producer, "restart-three", corpus, first, log)
    produce_corpus(producer, "restart-one", corpus, range(0, 300), DeliveryLog(), partitions=1)
    assert log.errors == [] and len(log.acked) == len(first)
    ids_before = {init_producer_id(node.bootstrap) for _ in range(2)}

    node.stop(stop_signal)
    if stop_signal == signal.SIGTERM:
        assert not node.last_stop_needed_kill, "broker did not exit within 10 s of SIGTERM"
    node.start()

    admin = admin_client(node.bootstrap)
    for name, partitions in topics.items():
        wait_for_topic(admin, name, partitions)
    resource = ConfigResource(ResourceType.TOPIC, "restart-three")
    assert wait_all(admin.describe_configs([resource]))[resource]["retention.ms"].value == "86400000"

    # Producer ids allocated after the restart are new.
    id_after = init_producer_id(node.bootstrap)
    assert id_after not in ids_before and id_after > max(ids_before), (ids_before, id_after)

    # The producer from before the restart keeps going (the broker restored its sequence
    # state from the log); a brand-new idempotent producer adds more. No duplicates anywhere.
    second = range(20_000, 25_000)
    log2 = DeliveryLog()
    produce_corpus(producer, "restart-three", corpus, second, log2)
    third = range(25_000, 30_000)
    log3 = DeliveryLog()
    produce_corpus(idempotent_producer(node.bootstrap), "restart-three", corpus, third, log3)
    assert log2.errors == [] and log3.errors == []

    consumer = assigned_consumer(node.bootstrap)
    try:
        total = len(first) + len(second) + len(third)
        assert sum(high_watermarks(consumer, "restart-three", 3)) == total
        consumer.assign([TopicPartition("restart-three", p, 0) for p in range(3)])
        messages = consume_exact(consumer, total)
        by_position = {(m.partition(), m.offset()): m for m in messages}
        assert len(by_position) == total
        for partition, offset, index in log.acked + log2.acked + log3.acked:
            msg = by_position.get((partition, offset))
            assert msg is not None, f"acknowledged message {index} at {partition}@{offset} lost"
            assert_message_matches(msg, corpus, index)
        indexes = [int(dict(m.headers() or [])["i"]) for m in messages if m.headers() and dict(m.headers()).get("i")]
        assert len(indexes) == len(set(indexes)), "duplicate records after restart"
        assert sum(high_watermarks(consumer, "restart-one", 1)) == 300
    finally:
        consumer.close()
