"""Transactions with real clients against a real broker: librdkafka (confluent-kafka) producers
and read_committed consumers, consume-transform-produce with offsets in the transaction,
fencing, broker SIGKILL + restart mid-transaction, transaction timeouts, and kafka-python's
admin views (DescribeTransactions, ListTransactions, DescribeProducers)."""

from __future__ import annotations

import time
import uuid

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka", reason="!!! confluent-kafka not installed: pip install -e '.[test]'")

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = pytest.mark.timeout(60)

PARTITIONS = 3


# ---------------------------------------------------------------- helpers

def create_topic(bootstrap: str, name: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=10).values():
        future.result(15)
    deadline = time.monotonic() + 15
    while True:
        meta = admin.list_topics(name, timeout=10).topics.get(name)
        if meta is not None and meta.error is None and len(meta.partitions) == partitions:
            return
        assert time.monotonic() < deadline, f"topic {name} not in metadata"
        time.sleep(0.1)


def txn_producer(bootstrap: str, transactional_id: str, **extra) -> Producer:
    config = {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5,
              "socket.connection.setup.timeout.ms": 5000, "reconnect.backoff.max.ms": 500}
    config.update(extra)
    producer = Producer(config)
    producer.init_transactions(30)
    return producer


def consumer(bootstrap: str, isolation: str = "read_committed", group: str | None = None, **extra) -> Consumer:
    config = {"bootstrap.servers": bootstrap, "group.id": group or f"txn-test-{uuid.uuid4().hex[:8]}",
              "isolation.level": isolation, "auto.offset.reset": "earliest", "enable.auto.commit": False,
              "fetch.wait.max.ms": 100, "enable.partition.eof": True,
              "socket.connection.setup.timeout.ms": 5000, "reconnect.backoff.max.ms": 500}
    config.update(extra)
    return Consumer(config)


def read_all(bootstrap: str, topic: str, isolation: str = "read_committed", partitions: int = PARTITIONS,
             timeout: float = 20) -> list[bytes]:
    """Every record value a consumer with `isolation` reads, up to the end of every partition."""
    c = consumer(bootstrap, isolation)
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        values: list[bytes] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(at_end) < partitions:
            assert time.monotonic() < deadline, f"{isolation} consumer did not reach the end of {topic}: {at_end}"
            for msg in c.consume(500, 0.2):
                err = msg.error()
                if err is not None:
                    if err.code() == confluent_kafka.KafkaError._PARTITION_EOF:
                        at_end.add(msg.partition())
                        continue
                    raise AssertionError(f"consumer error: {err}")
                at_end.discard(msg.partition())
                values.append(msg.value())
        return values
    finally:
        c.close()


def produce_values(producer: Producer, topic: str, values: list[bytes]) -> None:
    for i, value in enumerate(values):
        producer.produce(topic, value=value, partition=i % PARTITIONS)
    assert producer.flush(20) == 0


# ---------------------------------------------------------------- tests

def test_commit_and_abort_seen_only_when_committed(broker, topic_name) -> None:
    create_topic(broker.bootstrap, topic_name)
    producer = txn_producer(broker.bootstrap, f"tx-{topic_name}")
    committed = [b"c1-%d" % i for i in range(10)]
    aborted = [b"a-%d" % i for i in range(10)]
    later = [b"c2-%d" % i for i in range(10)]
    producer.begin_transaction()
    produce_values(producer, topic_name, committed)
    producer.commit_transaction(20)
    producer.begin_transaction()
    produce_values(producer, topic_name, aborted)   # flushed: the aborted data is in the log
    producer.abort_transaction(20)
    producer.begin_transaction()
    produce_values(producer, topic_name, later)
    producer.commit_transaction(20)
    assert sorted(read_all(broker.bootstrap, topic_name)) == sorted(committed + later)
    assert sorted(read_all(broker.bootstrap, topic_name, "read_uncommitted")) == sorted(committed + aborted + later)


def test_transactions_in_fsync_on_ack_mode(broker_factory, topic_name) -> None:
    broker = broker_factory({"kafkapy.log.fsync.on.ack": "true"})
    create_topic(broker.bootstrap, topic_name)
    producer = txn_producer(broker.bootstrap, f"tx-{topic_name}")
    for commit in (True, False, True):
        producer.begin_transaction()
        produce_values(producer, topic_name, [b"%s-%d" % (b"c" if commit else b"a", i) for i in range(6)])
        if commit:
            producer.commit_transaction(20)
        else:
            producer.abort_transaction(20)
    broker.kill9()
    broker.start()
    assert sorted(read_all(broker.bootstrap, topic_name)) == sorted([b"c-%d" % i for i in range(6)] * 2)


def test_open_transaction_holds_back_read_committed(broker, topic_name) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=1)
    plain = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    plain.produce(topic_name, value=b"before", partition=0)
    assert plain.flush(10) == 0
    producer = txn_producer(broker.bootstrap, f"tx-{topic_name}")
    producer.begin_transaction()
    producer.produce(topic_name, value=b"open", partition=0)
    assert producer.flush(10) == 0
    plain.produce(topic_name, value=b"after", partition=0)   # behind the open transaction
    assert plain.flush(10) == 0

    committed_view = consumer(broker.bootstrap)
    uncommitted_view = consumer(broker.bootstrap, "read_uncommitted")
    try:
        tp = TopicPartition(topic_name, 0)
        # ListOffsets LATEST: the last stable offset for read_committed, the high watermark otherwise
        assert committed_view.get_watermark_offsets(tp, timeout=10, cached=False)[1] == 1
        assert uncommitted_view.get_watermark_offsets(tp, timeout=10, cached=False)[1] == 3
        assert read_all(broker.bootstrap, topic_name, partitions=1) == [b"before"]
        producer.commit_transaction(20)
        assert read_all(broker.bootstrap, topic_name, partitions=1) == [b"before", b"open", b"after"]
        # the commit marker takes an offset too
        assert committed_view.get_watermark_offsets(tp, timeout=10, cached=False)[1] == 4
    finally:
        committed_view.close()
        uncommitted_view.close()


def test_consume_transform_produce_commits_offsets_with_the_output(broker, topic_name) -> None:
    source, sink, group = f"{topic_name}-in", f"{topic_name}-out", f"{topic_name}-group"
    create_topic(broker.bootstrap, source)
    create_topic(broker.bootstrap, sink)
    inputs = [b"%d" % i for i in range(60)]
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    produce_values(plain, source, inputs)

    producer = txn_producer(broker.bootstrap, f"tx-{topic_name}")
    c = consumer(broker.bootstrap, group=group, **{"enable.partition.eof": False})
    c.subscribe([source])
    try:
        # one aborted round: neither its output nor its offsets may count
        taken = []
        deadline = time.monotonic() + 30
        while not taken:
            assert time.monotonic() < deadline, "no input consumed"
            taken = [m for m in c.consume(20, 0.5) if m.error() is None]
        producer.begin_transaction()
        for m in taken:
            producer.produce(sink, value=b"ABORTED-" + m.value(), partition=m.partition())
        producer.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), 20)
        producer.abort_transaction(20)
        committed = {tp.partition: tp.offset for tp in c.committed(c.assignment(), timeout=10)}
        assert all(offset < 0 for offset in committed.values()), committed
        # rewind to what is committed (nothing yet) and process everything transactionally
        for tp in c.assignment():
            c.seek(TopicPartition(source, tp.partition, 0))
        done = 0
        deadline = time.monotonic() + 40
        while done < len(inputs):
            assert time.monotonic() < deadline, f"processed only {done}/{len(inputs)}"
            batch = [m for m in c.consume(25, 0.5) if m.error() is None]
            if not batch:
                continue
            producer.begin_transaction()
            for m in batch:
                producer.produce(sink, value=b"out-" + m.value(), partition=m.partition())
            producer.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), 20)
            producer.commit_transaction(20)
            done += len(batch)
        committed = {tp.partition: tp.offset for tp in c.committed(c.assignment(), timeout=10)}
    finally:
        c.close()
    ends = {}
    probe = consumer(broker.bootstrap)
    try:
        for p in range(PARTITIONS):
            ends[p] = probe.get_watermark_offsets(TopicPartition(source, p), timeout=10, cached=False)[1]
    finally:
        probe.close()
    assert committed == ends
    assert sorted(read_all(broker.bootstrap, sink)) == sorted(b"out-" + v for v in inputs)


def test_new_producer_instance_fences_the_old_one(broker, topic_name) -> None:
    create_topic(broker.bootstrap, topic_name)
    transactional_id = f"tx-{topic_name}"
    zombie = txn_producer(broker.bootstrap, transactional_id)
    zombie.begin_transaction()
    produce_values(zombie, topic_name, [b"zombie-%d" % i for i in range(6)])
    fresh = txn_producer(broker.bootstrap, transactional_id)  # aborts the zombie's transaction
    fresh.begin_transaction()
    produce_values(fresh, topic_name, [b"fresh-%d" % i for i in range(6)])
    fresh.commit_transaction(20)
    with pytest.raises(KafkaException) as excinfo:
        zombie.commit_transaction(20)
    assert excinfo.value.args[0].fatal() or "fenced" in str(excinfo.value).lower()
    assert sorted(read_all(broker.bootstrap, topic_name)) == sorted(b"fresh-%d" % i for i in range(6))


def test_broker_sigkill_mid_transaction_then_new_producer_aborts_it(broker_factory, topic_name) -> None:
    broker = broker_factory()
    create_topic(broker.bootstrap, topic_name)
    transactional_id = f"tx-{topic_name}"
    producer = txn_producer(broker.bootstrap, transactional_id)
    producer.begin_transaction()
    produce_values(producer, topic_name, [b"kept-%d" % i for i in range(9)])
    producer.commit_transaction(20)
    producer.begin_transaction()
    produce_values(producer, topic_name, [b"lost-%d" % i for i in range(9)])
    broker.kill9()
    broker.start()
    replacement = txn_producer(broker.bootstrap, transactional_id)
    replacement.begin_transaction()
    produce_values(replacement, topic_name, [b"new-%d" % i for i in range(9)])
    replacement.commit_transaction(20)
    expected = [b"kept-%d" % i for i in range(9)] + [b"new-%d" % i for i in range(9)]
    assert sorted(read_all(broker.bootstrap, topic_name)) == sorted(expected)
    uncommitted = read_all(broker.bootstrap, topic_name, "read_uncommitted")
    assert sorted(v for v in uncommitted if v.startswith(b"lost")) == sorted(b"lost-%d" % i for i in range(9))


def test_broker_sigkill_mid_transaction_then_same_producer_commits(broker_factory, topic_name) -> None:
    broker = broker_factory()
    create_topic(broker.bootstrap, topic_name)
    producer = txn_producer(broker.bootstrap, f"tx-{topic_name}")
    producer.begin_transaction()
    produce_values(producer, topic_name, [b"v-%d" % i for i in range(9)])
    broker.kill9()
    broker.start()
    producer.commit_transaction(30)
    assert sorted(read_all(broker.bootstrap, topic_name)) == sorted(b"v-%d" % i for i in range(9))


def test_abandoned_transaction_times_out_after_restart(broker_factory, topic_name) -> None:
    broker = broker_factory({"transaction.abort.timed.out.transaction.cleanup.interval.ms": "300"})
    create_topic(broker.bootstrap, topic_name, partitions=1)
    producer = txn_producer(broker.bootstrap, f"tx-{topic_name}", **{"transaction.timeout.ms": 3000})
    producer.begin_transaction()
    producer.produce(topic_name, value=b"abandoned", partition=0)
    assert producer.flush(10) == 0
    broker.kill9()
    broker.start()
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce(topic_name, value=b"visible", partition=0)
    assert plain.flush(10) == 0
    # the coordinator aborts the transaction once its timeout passes, which frees the LSO
    deadline = time.monotonic() + 30
    while not (seen := read_all(broker.bootstrap, topic_name, partitions=1)):
        assert time.monotonic() < deadline, "the abandoned transaction still holds back read_committed"
        time.sleep(0.5)
    assert seen == [b"visible"]


def test_kafka_python_admin_sees_transactions_and_producers(broker, topic_name) -> None:
    kafka_admin = pytest.importorskip("kafka.admin")
    from kafka import TopicPartition as KTopicPartition

    create_topic(broker.bootstrap, topic_name)
    transactional_id = f"tx-{topic_name}"
    producer = txn_producer(broker.bootstrap, transactional_id, **{"transaction.timeout.ms": 45000})
    producer.begin_transaction()
    producer.produce(topic_name, value=b"x", partition=1)
    assert producer.flush(10) == 0
    admin = kafka_admin.KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        described = admin.describe_transactions([transactional_id])[transactional_id]
        assert str(getattr(described.state, "value", described.state)) == "Ongoing"
        assert described.transaction_timeout_ms == 45000
        assert described.topic_partitions == {KTopicPartition(topic_name, 1)}
        listed = [t for listing in admin.list_transactions().values() for t in listing]
        mine = [t for t in listed if t.transactional_id == transactional_id]
        assert len(mine) == 1 and mine[0].producer_id == described.producer_id
        producers = admin.describe_producers([KTopicPartition(topic_name, 1)])[KTopicPartition(topic_name, 1)]
        [state] = [p for p in producers.active_producers if p.producer_id == described.producer_id]
        assert state.current_transaction_start_offset == 0 and state.producer_epoch == described.producer_epoch
        producer.commit_transaction(20)
        described = admin.describe_transactions([transactional_id])[transactional_id]
        assert str(getattr(described.state, "value", described.state)) == "CompleteCommit"
    finally:
        admin.close()


def test_aiokafka_transactions_with_offsets(broker, topic_name) -> None:
    pytest.importorskip("aiokafka")
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka import TopicPartition as ATopicPartition

    create_topic(broker.bootstrap, topic_name)
    group = f"{topic_name}-group"

    async def run() -> dict:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=f"tx-{topic_name}")
        await producer.start()
        try:
            async with producer.transaction():
                for i in range(6):
                    await producer.send(topic_name, value=b"kept-%d" % i, partition=i % PARTITIONS)
                await producer.send_offsets_to_transaction({ATopicPartition(topic_name, 0): 5}, group)
            try:
                async with producer.transaction():
                    for i in range(6):
                        await producer.send(topic_name, value=b"dropped-%d" % i, partition=i % PARTITIONS)
                    await producer.send_offsets_to_transaction({ATopicPartition(topic_name, 0): 99}, group)
                    raise RuntimeError("abort this one")
            except RuntimeError:
                pass
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False)
        await consumer.start()
        try:
            committed = {p: await consumer.committed(ATopicPartition(topic_name, p)) for p in range(PARTITIONS)}
        finally:
            await consumer.stop()
        reader = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level="read_committed",
                                  auto_offset_reset="earliest", enable_auto_commit=False)
        await reader.start()
        try:
            reader.assign([ATopicPartition(topic_name, p) for p in range(PARTITIONS)])
            values = []
            deadline = asyncio.get_running_loop().time() + 20
            while len(values) < 6 and asyncio.get_running_loop().time() < deadline:
                for records in (await reader.getmany(timeout_ms=200)).values():
                    values.extend(r.value for r in records)
        finally:
            await reader.stop()
        return committed, sorted(values)

    committed, aiokafka_values = asyncio.run(run())
    assert committed == {0: 5, 1: None, 2: None}
    assert aiokafka_values == sorted(b"kept-%d" % i for i in range(6))
    assert sorted(read_all(broker.bootstrap, topic_name)) == sorted(b"kept-%d" % i for i in range(6))
    assert len(read_all(broker.bootstrap, topic_name, "read_uncommitted")) == 12


# -- errors on the wire (kafka-python's protocol classes over a raw socket) ----------------
def test_transaction_errors_on_the_wire(broker, topic_name) -> None:
    from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
    from kafka.protocol.producer import (
        AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest, AddPartitionsToTxnResponse,
        EndTxnRequest, EndTxnResponse, InitProducerIdRequest, InitProducerIdResponse, ProduceRequest,
        ProduceResponse, TxnOffsetCommitRequest, TxnOffsetCommitResponse)

    from conformance.kafka_wire import RawConnection
    from kafkapy.protocol.records import build_batch

    def call(request, response_cls, version: int):
        request.with_header(correlation_id=11, client_id="kafkapy-txn-wire")
        with RawConnection(broker.bootstrap) as conn:
            body = conn.roundtrip(bytes(request.encode(version=version, header=True, framed=True)))
        return response_cls.decode(body, version=version, header=True)

    bs = broker.bootstrap
    create_topic(bs, topic_name, partitions=2)
    tid = f"wire-{topic_name}"
    found = call(FindCoordinatorRequest(key_type=1, coordinator_keys=[tid]), FindCoordinatorResponse, 4)
    assert [(c.error_code, c.port) for c in found.coordinators] == [(0, broker.port)]

    def init(timeout_ms: int = 60_000, version: int = 4):
        return call(InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=timeout_ms,
                                          producer_id=-1, producer_epoch=-1), InitProducerIdResponse, version)

    assert init(timeout_ms=900_001).error_code == 50  # INVALID_TRANSACTION_TIMEOUT
    first = init()
    assert first.error_code == 0 and first.producer_epoch == 0
    pid, epoch = first.producer_id, first.producer_epoch

    Topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic

    def add(topics, version=3, producer_epoch=epoch):
        response = call(AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=producer_epoch, v3_and_below_topics=topics), AddPartitionsToTxnResponse, version)
        return {(t.name, p.partition_index): p.partition_error_code
                for t in response.results_by_topic_v3_and_below for p in t.results_by_partition}

    # an unknown partition fails the whole request
    assert add([Topic(name=topic_name, partitions=[0]), Topic(name="no-such-topic", partitions=[0])]) == {
        (topic_name, 0): 55, ("no-such-topic", 0): 3}  # OPERATION_NOT_ATTEMPTED, UNKNOWN_TOPIC_OR_PARTITION
    # a stale epoch: PRODUCER_FENCED from v2, INVALID_PRODUCER_EPOCH before
    assert add([Topic(name=topic_name, partitions=[0])], producer_epoch=epoch + 5) == {(topic_name, 0): 90}
    assert add([Topic(name=topic_name, partitions=[0])], version=1, producer_epoch=epoch + 5) == {(topic_name, 0): 47}
    # nothing to end yet
    end = call(EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=True),
               EndTxnResponse, 3)
    assert end.error_code == 48  # INVALID_TXN_STATE
    assert add([Topic(name=topic_name, partitions=[0])]) == {(topic_name, 0): 0}

    # KIP-890 verification (v4, broker-to-broker): partition 1 is not in the transaction
    verify = call(AddPartitionsToTxnRequest(transactions=[AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
        transactional_id=tid, producer_id=pid, producer_epoch=epoch, verify_only=True,
        topics=[Topic(name=topic_name, partitions=[0, 1])])]), AddPartitionsToTxnResponse, 4)
    [result] = verify.results_by_transaction
    assert {p.partition_index: p.partition_error_code for t in result.topic_results
            for p in t.results_by_partition} == {0: 0, 1: 120}  # TRANSACTION_ABORTABLE

    # ... and the produce path refuses a transactional batch for it
    def produce(partition: int, version: int, transactional_id: str | None = tid):
        batch = build_batch([(None, b"x")], producer_id=pid, producer_epoch=epoch, base_sequence=0,
                            is_transactional=True)
        P = ProduceRequest.TopicProduceData.PartitionProduceData
        request = ProduceRequest(transactional_id=transactional_id, acks=-1, timeout_ms=5000, topic_data=[
            ProduceRequest.TopicProduceData(name=topic_name, partition_data=[P(index=partition, records=batch)])])
        response = call(request, ProduceResponse, version)
        return response.responses[0].partition_responses[0].error_code

    assert add([Topic(name="__transaction_state", partitions=[0])]) == {("__transaction_state", 0): 29}
    assert produce(1, 9) == 48    # INVALID_TXN_STATE for clients before Produce v11
    assert produce(1, 11) == 120  # TRANSACTION_ABORTABLE from v11
    assert produce(0, 9, transactional_id=None) == 53  # TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert produce(0, 9) == 0

    # TxnOffsetCommit needs AddOffsetsToTxn first
    group = f"{topic_name}-group"
    found = call(FindCoordinatorRequest(key_type=0, coordinator_keys=[group]), FindCoordinatorResponse, 4)
    assert found.coordinators[0].error_code == 0
    T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    commit = TxnOffsetCommitRequest(transactional_id=tid, group_id=group, producer_id=pid, producer_epoch=epoch,
                                    topics=[T(name=topic_name, partitions=[T.TxnOffsetCommitRequestPartition(
                                        partition_index=0, committed_offset=1)])])
    assert call(commit, TxnOffsetCommitResponse, 2).topics[0].partitions[0].error_code == 48
    assert call(AddOffsetsToTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch, group_id=group),
                AddOffsetsToTxnResponse, 3).error_code == 0
    assert call(commit, TxnOffsetCommitResponse, 2).topics[0].partitions[0].error_code == 0

    end = call(EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=True),
               EndTxnResponse, 3)
    assert end.error_code == 0
    # retrying the commit is fine, switching to abort is not
    assert call(EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=True),
                EndTxnResponse, 3).error_code == 0
    assert call(EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=False),
                EndTxnResponse, 3).error_code == 48
    assert init().producer_epoch == epoch + 1
    # the old epoch is now fenced: v0 clients hear INVALID_PRODUCER_EPOCH
    assert call(EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=True),
                EndTxnResponse, 0).error_code == 47
