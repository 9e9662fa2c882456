"""confluent-kafka (librdkafka) running the matrix's scenarios; works from 2.0.2 to the newest.

Errors are reported as librdkafka's error names (KafkaError.name(): TOPIC_ALREADY_EXISTS,
_UNKNOWN_TOPIC, ...), the closest thing this client has to an exception class.
"""

from __future__ import annotations

import time
from typing import Any

import confluent_kafka
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from scenario_base import (
    RECORD_COUNT,
    RETENTION_MS_AFTER,
    SECOND_BATCH,
    TXN_RECORDS,
    record,
    require_authorizer,
    round_trips,
    wait_until,
)


def _error_name(exc: BaseException) -> str:
    # A fatal error raised by flush() while a delivery callback runs arrives as a SystemError whose
    # cause is the KafkaException (confluent-kafka >= 2.x).
    if isinstance(exc, SystemError) and isinstance(exc.__cause__, KafkaException):
        exc = exc.__cause__
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0].name()
    return type(exc).__name__


class ConfluentClient:
    """The scenarios with confluent-kafka's Producer, Consumer and AdminClient."""

    def __init__(self, bootstrap: str, prefix: str) -> None:
        self.bootstrap = bootstrap
        self.prefix = prefix
        self.version = confluent_kafka.version()[0]

    def _admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap})

    def _setup_topic(self, name: str, partitions: int = 1) -> None:
        admin = self._admin()
        admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])[name].result(10)
        wait_until(lambda: name in admin.list_topics(timeout=5).topics)

    def _producer(self, **config: Any) -> Producer:
        return Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "linger.ms": 5, **config})

    def _consumer(self, group: str, **config: Any) -> Consumer:
        return Consumer({"bootstrap.servers": self.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, **config})

    def _write(self, topic: str, start: int, count: int, **config: Any) -> list[Any]:
        producer = self._producer(**config)
        delivered: list[Any] = []
        for i in range(start, start + count):
            key, value = record(i)
            producer.produce(topic, value=value, key=key, partition=0, headers=[("i", str(i).encode())],
                             on_delivery=lambda err, msg: delivered.append((err, msg)))
        producer.flush(10)
        errors = [err for err, _ in delivered if err is not None]
        if errors or len(delivered) != count:
            raise KafkaException(errors[0] if errors else KafkaError(KafkaError._TIMED_OUT))
        return [msg.offset() for _, msg in delivered]

    def _read(self, consumer: Consumer, count: int, timeout_s: float = 10.0) -> list[Any]:
        records: list[Any] = []
        deadline = time.monotonic() + timeout_s
        while len(records) < count and time.monotonic() < deadline:
            for msg in consumer.consume(count - len(records), timeout=0.5):
                if msg.error() is None:
                    records.append(msg)
                elif msg.error().code() != KafkaError._PARTITION_EOF:
                    raise KafkaException(msg.error())
        return records

    def _read_assigned(self, topic: str, count: int, **config: Any) -> list[Any]:
        consumer = self._consumer(f"{self.prefix}-assign", **config)
        try:
            consumer.assign([TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
            records = self._read(consumer, count, timeout_s=5)
            records.extend(m for m in consumer.consume(10, timeout=0.5) if m.error() is None)
            return records
        finally:
            consumer.close()

    def metadata(self) -> dict[str, Any]:
        cluster = self._admin().list_topics(timeout=10)
        return {"brokers": len(cluster.brokers), "controller": cluster.controller_id >= 0,
                "topics_listed": isinstance(cluster.topics, dict)}

    def create_delete_topic(self) -> dict[str, Any]:
        topic = f"{self.prefix}-created"
        admin = self._admin()
        admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])[topic].result(10)
        wait_until(lambda: topic in admin.list_topics(timeout=5).topics)
        partitions = len(admin.list_topics(topic=topic, timeout=5).topics[topic].partitions)
        try:
            admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])[topic].result(10)
            twice = "none"
        except KafkaException as exc:
            twice = _error_name(exc)
        admin.delete_topics([topic])[topic].result(10)
        gone = wait_until(lambda: topic not in admin.list_topics(timeout=5).topics)
        return {"partitions": partitions, "create_twice_error": twice, "gone_after_delete": gone}

    def produce(self, codec: str) -> dict[str, Any]:
        topic = f"{self.prefix}-produce-{codec}"
        self._setup_topic(topic)
        offsets = self._write(topic, 0, RECORD_COUNT, **{"enable.idempotence": True, "compression.type": codec})
        records = self._read_assigned(topic, RECORD_COUNT)
        return {"first_offset": offsets[0], "last_offset": offsets[-1], "read": len(records),
                "round_trip": round_trips([(m.key(), m.value()) for m in records]), "idempotent": True,
                "headers_round_trip": all(m.headers() == [("i", str(i).encode())] for i, m in enumerate(records))}

    def group_consume_commit(self) -> dict[str, Any]:
        topic = f"{self.prefix}-group"
        group = f"{self.prefix}-g"
        self._setup_topic(topic)
        self._write(topic, 0, RECORD_COUNT)
        first = self._consumer(group)
        try:
            first.subscribe([topic])
            records = self._read(first, RECORD_COUNT, timeout_s=15)
            first.commit(asynchronous=False)
            committed = first.committed([TopicPartition(topic, 0)], timeout=10)[0].offset
        finally:
            first.close()
        self._write(topic, RECORD_COUNT, SECOND_BATCH)
        second = self._consumer(group)
        try:
            second.subscribe([topic])
            later = self._read(second, SECOND_BATCH, timeout_s=15)
        finally:
            second.close()
        return {"read": len(records), "committed": committed, "second_read": len(later),
                "second_first_offset": later[0].offset() if later else None,
                "second_round_trip": round_trips([(m.key(), m.value()) for m in later], RECORD_COUNT)}

    def transactions(self) -> dict[str, Any]:
        topic = f"{self.prefix}-txn"
        self._setup_topic(topic)
        producer = self._producer(**{"transactional.id": f"{self.prefix}-tx"})
        producer.init_transactions(10)
        for commit, start in ((True, 0), (False, TXN_RECORDS)):
            producer.begin_transaction()
            for i in range(start, start + TXN_RECORDS):
                producer.produce(topic, value=record(i)[1], key=record(i)[0], partition=0)
            producer.flush(10)
            if commit:
                producer.commit_transaction(10)
            else:
                producer.abort_transaction(10)
        committed = self._read_assigned(topic, TXN_RECORDS, **{"isolation.level": "read_committed"})
        uncommitted = self._read_assigned(topic, 2 * TXN_RECORDS, **{"isolation.level": "read_uncommitted"})
        return {"read_committed": len(committed), "read_uncommitted": len(uncommitted)}

    def admin_describe_configs(self) -> dict[str, Any]:
        topic = f"{self.prefix}-configs"
        self._setup_topic(topic)
        admin = self._admin()

        def describe(kind: str, name: str) -> dict[str, Any]:
            resource = ConfigResource(kind, name)
            return admin.describe_configs([resource])[resource].result(10)

        def value_source(entry: Any) -> list[str]:
            return [entry.value, confluent_kafka.admin.ConfigSource(entry.source).name]

        before = describe("topic", topic)
        broker = describe("broker", "1")
        if hasattr(admin, "incremental_alter_configs"):
            from confluent_kafka.admin import AlterConfigOpType, ConfigEntry

            resource = ConfigResource("topic", topic, incremental_configs=[
                ConfigEntry("retention.ms", RETENTION_MS_AFTER, incremental_operation=AlterConfigOpType.SET)])
            admin.incremental_alter_configs([resource])[resource].result(10)
            api = "incremental_alter_configs"
        else:
            resource = ConfigResource("topic", topic, set_config={"retention.ms": RETENTION_MS_AFTER})
            admin.alter_configs([resource])[resource].result(10)
            api = "alter_configs"
        after = describe("topic", topic)
        return {"retention_ms_before": value_source(before["retention.ms"]),
                "retention_ms_after": value_source(after["retention.ms"]),
                "cleanup_policy": value_source(before["cleanup.policy"]),
                "broker_compression_type": broker["compression.type"].value, "alter_api": api}

    def error_unknown_topic(self) -> dict[str, Any]:
        topic = f"{self.prefix}-missing"
        metadata = self._admin().list_topics(topic=topic, timeout=10).topics[topic]
        describe_error = metadata.error.name() if metadata.error is not None else "none"
        producer = self._producer(**{"topic.metadata.propagation.max.ms": 1000, "message.timeout.ms": 5000})
        delivered: list[Any] = []
        producer.produce(topic, value=b"v", on_delivery=lambda err, msg: delivered.append(err))
        producer.flush(10)
        error = delivered[0].name() if delivered and delivered[0] is not None else "none"
        return {"error": error, "describe_error": describe_error}

    def error_fenced_producer(self) -> dict[str, Any]:
        topic = f"{self.prefix}-fenced"
        self._setup_topic(topic)
        txn_id = f"{self.prefix}-fenced-tx"
        first = self._producer(**{"transactional.id": txn_id})
        first.init_transactions(10)
        first.begin_transaction()
        first.produce(topic, value=b"first", partition=0)
        first.flush(10)
        second = self._producer(**{"transactional.id": txn_id})
        second.init_transactions(10)
        delivered: list[Any] = []
        try:
            first.produce(topic, value=b"again", partition=0, on_delivery=lambda err, msg: delivered.append(err))
            first.flush(10)
            first.commit_transaction(10)
            return {"error": "none"}
        except (KafkaException, SystemError) as exc:
            return {"error": _error_name(exc)}

    def error_not_authorized(self) -> dict[str, Any]:
        require_authorizer()
        from confluent_kafka.admin import (
            AclBinding,
            AclOperation,
            AclPermissionType,
            ResourcePatternType,
            ResourceType,
        )

        topic = f"{self.prefix}-denied"
        self._setup_topic(topic)
        admin = self._admin()
        acl = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:ANONYMOUS", "*",
                         AclOperation.ALL, AclPermissionType.DENY)
        admin.create_acls([acl])[acl].result(10)
        producer = self._producer(**{"message.timeout.ms": 5000})
        delivered: list[Any] = []
        producer.produce(topic, value=b"v", partition=0, on_delivery=lambda err, msg: delivered.append(err))
        producer.flush(10)
        return {"error": delivered[0].name() if delivered and delivered[0] is not None else "none"}
