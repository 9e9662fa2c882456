"""aiokafka smoke test: produce (plain and idempotent) with acks=all and gzip, consume back with assign() and seek."""

from __future__ import annotations

import asyncio

import pytest

aiokafka = pytest.importorskip("aiokafka", reason="!!! aiokafka not installed: pip install -e '.[test]'")

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition  # noqa: E402
from aiokafka.admin import AIOKafkaAdminClient, NewTopic  # noqa: E402

pytestmark = pytest.mark.timeout(60)

MESSAGES = 1000


async def produce_and_consume(bootstrap: str, topic: str, idempotent: bool) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])
    finally:
        await admin.close()

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=idempotent,
                                compression_type="gzip", linger_ms=5)
    await producer.start()
    try:
        sent = []
        for i in range(MESSAGES):
            sent.append(await producer.send(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % 2,
                                            headers=[("n", str(i).encode())]))
        metadata = await asyncio.gather(*sent)
    finally:
        await producer.stop()
    assert [m.offset for m in metadata if m.partition == 0] == list(range(MESSAGES // 2))

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                                auto_offset_reset="none")
    await consumer.start()
    try:
        partitions = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
        consumer.assign(partitions)
        for tp in partitions:
            consumer.seek(tp, 0)
        assert await consumer.end_offsets(partitions) == {tp: MESSAGES // 2 for tp in partitions}
        received = {}
        while len(received) < MESSAGES:
            batch = await consumer.getmany(timeout_ms=1000)
            for tp, records in batch.items():
                for r in records:
                    received[(tp.partition, r.offset)] = r
        for i in range(MESSAGES):
            r = received[(i % 2, i // 2)]
            assert (r.key, r.value, list(r.headers)) == (b"k%d" % i, b"v%d" % i, [("n", str(i).encode())])
    finally:
        await consumer.stop()


@pytest.mark.parametrize("idempotent", [False, True], ids=["plain", "idempotent"])
def test_aiokafka_produce_consume_assign(broker, topic_name, idempotent):
    asyncio.run(asyncio.wait_for(produce_and_consume(broker.bootstrap, topic_name, idempotent), timeout=50))
