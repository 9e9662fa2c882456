"""A broker with the web console and data to look at, for the console's tests and screenshots.

`console_broker()` starts a real kafkapy process with the console on a free port; `load_workload()`
fills it: a topic "orders" (3 partitions, JSON values with headers, timestamps an hour apart in
two halves), a topic "big" of 1,000 partitions, a committing group "orders-app" that is Empty
afterwards (lag known), a consumer "spark-like" that fetches orders-0 and never commits, and a
group "big-readers" of 100 members joined on the wire with kafkapy's own protocol client
(JoinGroup v3 / SyncGroup v2: one generation, range-style assignment).
"""
from __future__ import annotations

import asyncio
import json
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from conformance.broker_process import BrokerProcess, free_port, start_broker

ORDERS = "orders"
BIG = "big"
BIG_PARTITIONS = 1000
BIG_MEMBERS = 100
ORDERS_APP = "orders-app"
BIG_GROUP = "big-readers"
ORDERS_P0_RECORDS = 30
COMMITTED_P0 = 12


@dataclass
class Workload:
    old_ts: int  # timestamp of orders-0 offsets 0-9
    new_ts: int  # timestamp of orders-0 offsets 10+


def console_broker(writes: bool = True, extra: dict | None = None) -> tuple[BrokerProcess, str]:
    """A broker with the console on a free port, its data on tmpfs where there is one (creating
    1,000 partitions fsyncs 1,000 directories: seconds on a busy disk)."""
    port = free_port()
    overrides = {"kafkapy.console.listener": f"http://127.0.0.1:{port}",
                 "kafkapy.console.writes.enable": "true" if writes else "false",
                 "group.initial.rebalance.delay.ms": "1500", "offsets.topic.num.partitions": "5"}
    overrides.update(extra or {})
    shm = Path("/dev/shm")
    work_dir = Path(tempfile.mkdtemp(prefix="kafkapy-console-", dir=shm if shm.is_dir() else None))
    broker = start_broker(overrides=overrides, work_dir=work_dir)
    broker._owns_work_dir = True  # close() removes it, as for a directory start_broker makes
    return broker, f"http://127.0.0.1:{port}"


def order_value(i: int) -> bytes:
    return json.dumps({"order": i, "item": "pizza" if i % 2 else "pasta", "qty": i % 5 + 1}).encode()


def load_workload(bootstrap: str, big: bool = True) -> Workload:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    try:
        topics = [NewTopic(ORDERS, 3, 1, topic_configs={"retention.ms": "604800000"})]
        if big:
            topics.append(NewTopic(BIG, BIG_PARTITIONS, 1))
        admin.create_topics(topics, timeout_ms=30000)
    finally:
        admin.close()
    now = int(time.time() * 1000)
    workload = Workload(old_ts=now - 2 * 3600 * 1000, new_ts=now - 60 * 1000)
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    try:
        for i in range(ORDERS_P0_RECORDS):
            producer.send(ORDERS, key=f"order-{i}".encode(), value=order_value(i), partition=0,
                          headers=[("trace-id", f"trace-{i:04d}".encode()), ("source", b"web")],
                          timestamp_ms=workload.old_ts if i < 10 else workload.new_ts)
        for p in (1, 2):
            for i in range(5):
                producer.send(ORDERS, key=b"k", value=b"\x00\x01binary\xff", partition=p)
        if big:
            for p in range(0, BIG_PARTITIONS, 100):
                producer.send(BIG, value=b"x", partition=p)
        producer.flush(30)
    finally:
        producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=ORDERS_APP, enable_auto_commit=False)
    try:
        from kafka.structs import OffsetAndMetadata

        consumer.commit({TopicPartition(ORDERS, 0): OffsetAndMetadata(COMMITTED_P0, "", -1),
                         TopicPartition(ORDERS, 1): OffsetAndMetadata(2, "", -1)})
    finally:
        consumer.close()
    fetch_without_committing(bootstrap)
    host, port = bootstrap.split(":")
    asyncio.run(ask_for_a_missing_topic(host, int(port)))
    if big:
        asyncio.run(join_members(host, int(port), BIG_GROUP, BIG, BIG_PARTITIONS, BIG_MEMBERS))
    return workload


def fetch_without_committing(bootstrap: str) -> None:
    """A consumer that reads orders-0 from offset 20 and never commits (as Spark's source)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, client_id="spark-like", enable_auto_commit=False,
                             max_poll_records=5)
    try:
        tp = TopicPartition(ORDERS, 0)
        consumer.assign([tp])
        consumer.seek(tp, 20)
        got = 0
        deadline = time.monotonic() + 15
        while got == 0 and time.monotonic() < deadline:
            got += sum(len(v) for v in consumer.poll(timeout_ms=500).values())
    finally:
        consumer.close()


async def ask_for_a_missing_topic(host: str, port: int) -> None:
    """One error response for the requests page: Metadata for a topic that does not exist."""
    from kafkapy.net.client import BrokerConnection
    from kafkapy.protocol.messages import MetadataRequest

    conn = BrokerConnection(host, port, client_id="typo-client")
    try:
        response = await conn.send(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="ordres")],
                                                   allow_auto_topic_creation=False), 9, timeout_s=10)
        assert response.topics[0].error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
    finally:
        conn.close()


async def join_members(host: str, port: int, group: str, topic: str, partitions: int, members: int) -> None:
    """`members` consumers of `group` in one generation, each assigned a range of `topic`."""
    from kafkapy.protocol.consumer_protocol import encode_assignment, encode_subscription
    from kafkapy.net.client import BrokerConnection
    from kafkapy.protocol.messages import FindCoordinatorRequest, JoinGroupRequest, SyncGroupRequest

    conns = [BrokerConnection(host, port, client_id=f"reader-{i:03d}") for i in range(members)]
    subscription = encode_subscription([topic])
    try:
        for _ in range(50):  # the first FindCoordinator creates __consumer_offsets
            found = await conns[0].send(FindCoordinatorRequest(key=group), 1, timeout_s=10)
            if found.error_code == 0:
                break
            await asyncio.sleep(0.1)
        joins = await asyncio.gather(*(conn.send(JoinGroupRequest(
            group_id=group, session_timeout_ms=120_000, rebalance_timeout_ms=30_000, member_id="",
            protocol_type="consumer", protocols=[JoinGroupRequest.JoinGroupRequestProtocol(
                name="range", metadata=subscription)]), 3, timeout_s=40) for conn in conns))
        errors = {j.error_code for j in joins}
        generations = {j.generation_id for j in joins}
        assert errors == {0} and len(generations) == 1, (errors, generations)
        leader = next(j for j in joins if j.member_id == j.leader)
        ids = sorted(m.member_id for m in leader.members)
        per = -(-partitions // len(ids))
        assignments = [SyncGroupRequest.SyncGroupRequestAssignment(
            member_id=mid, assignment=encode_assignment({topic: list(range(i * per, min((i + 1) * per, partitions)))}))
            for i, mid in enumerate(ids)]
        syncs = await asyncio.gather(*(conn.send(SyncGroupRequest(
            group_id=group, generation_id=j.generation_id, member_id=j.member_id,
            assignments=assignments if j.member_id == j.leader else []), 2, timeout_s=40)
            for conn, j in zip(conns, joins)))
        assert {s.error_code for s in syncs} == {0}
    finally:
        for conn in conns:
            conn.close()
