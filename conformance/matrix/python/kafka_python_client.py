"""kafka-python running the matrix's scenarios, with api_version negotiated or pinned.

A pinned api_version makes the client speak only what that Kafka release had: (0, 10) has no
idempotence, transactions, zstd or headers, so those scenarios are `unsupported` there. Topics a
scenario only needs as a place to write (not the scenario's subject) are created by an admin client
with the negotiated version, so that an old pinned version still gets to run the produce/consume part.
"""

from __future__ import annotations

import time
from typing import Any

import kafka
import kafka.errors as kerrors
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import (
    ACL,
    ACLOperation,
    ACLPermissionType,
    ConfigResource,
    ConfigResourceType,
    ResourcePattern,
    ResourceType,
)

from scenario_base import (
    RECORD_COUNT,
    RETENTION_MS_AFTER,
    SECOND_BATCH,
    TXN_RECORDS,
    Unsupported,
    record,
    require_authorizer,
    round_trips,
    wait_until,
)

TIMEOUTS = {"request_timeout_ms": 10000}


def _error_name(exc: BaseException) -> str:
    return type(exc).__name__


class KafkaPythonClient:
    """The scenarios with kafka-python; `api_version` None negotiates, a tuple pins."""

    def __init__(self, bootstrap: str, prefix: str, api_version: tuple[int, int] | None) -> None:
        self.bootstrap = bootstrap
        self.prefix = prefix
        self.api_version = api_version
        self.version = kafka.__version__

    # -- helpers -----------------------------------------------------------------------------

    def _pinned(self) -> dict[str, Any]:
        return {"api_version": self.api_version} if self.api_version else {}

    def _at_least(self, version: tuple[int, int]) -> bool:
        return self.api_version is None or self.api_version >= version

    def _admin(self, pinned: bool = True) -> KafkaAdminClient:
        return KafkaAdminClient(bootstrap_servers=self.bootstrap, **(self._pinned() if pinned else {}), **TIMEOUTS)

    def _setup_topic(self, name: str, partitions: int = 1) -> None:
        admin = self._admin(pinned=False)
        try:
            admin.create_topics({name: {"num_partitions": partitions, "replication_factor": 1}},
                                wait_for_metadata=True)
        finally:
            admin.close()

    def _producer(self, **config: Any) -> KafkaProducer:
        settings = {"acks": "all", "max_block_ms": 10000, **self._pinned(), **TIMEOUTS, **config}
        return KafkaProducer(bootstrap_servers=self.bootstrap, **settings)

    def _consumer(self, **config: Any) -> KafkaConsumer:
        settings = {"auto_offset_reset": "earliest", "enable_auto_commit": False, **self._pinned(), **TIMEOUTS,
                    **config}
        return KafkaConsumer(bootstrap_servers=self.bootstrap, **settings)

    def _write(self, topic: str, start: int, count: int, headers: bool = False, **config: Any) -> list[int]:
        producer = self._producer(**config)
        try:
            futures = [producer.send(topic, key=record(i)[0], value=record(i)[1], partition=0,
                                     **({"headers": [("i", str(i).encode())]} if headers else {}))
                       for i in range(start, start + count)]
            producer.flush(10)
            return [future.get(timeout=10).offset for future in futures]
        finally:
            producer.close(timeout=5)

    def _read(self, consumer: KafkaConsumer, count: int, timeout_s: float = 10.0) -> list[Any]:
        records: list[Any] = []
        deadline = time.monotonic() + timeout_s
        while len(records) < count and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                records.extend(batch)
        return records

    # -- scenarios ---------------------------------------------------------------------------

    def metadata(self) -> dict[str, Any]:
        consumer = self._consumer()
        try:
            topics = consumer.topics()
            cluster = consumer._client.cluster
            brokers = cluster.brokers()
            controller = cluster.controller
            return {"brokers": len(brokers), "controller": controller is not None,
                    "topics_listed": isinstance(topics, set)}
        finally:
            consumer.close()

    def create_delete_topic(self) -> dict[str, Any]:
        if not self._at_least((0, 10, 1)):
            raise Unsupported("CreateTopics needs Kafka 0.10.1 (api_version pinned to 0.10.0)")
        topic = f"{self.prefix}-created"
        admin = self._admin()
        try:
            admin.create_topics({topic: {"num_partitions": 3, "replication_factor": 1}})
            wait_until(lambda: topic in admin.list_topics())
            described = admin.describe_topics([topic])[0]
            partitions = len(described["partitions"])
            try:
                admin.create_topics({topic: {"num_partitions": 3, "replication_factor": 1}})
                twice = "none"
            except kerrors.KafkaError as exc:
                twice = _error_name(exc)
            admin.delete_topics([topic])
            gone = wait_until(lambda: topic not in admin.list_topics())
            return {"partitions": partitions, "create_twice_error": twice, "gone_after_delete": gone}
        finally:
            admin.close()

    def produce(self, codec: str) -> dict[str, Any]:
        config: dict[str, Any] = {}
        if codec != "none":
            config["compression_type"] = codec
        if codec == "zstd" and not self._at_least((2, 1)):
            raise Unsupported("zstd needs Kafka 2.1 (api_version pinned lower)")
        idempotent = self._at_least((0, 11))
        if idempotent:
            config["enable_idempotence"] = True
        topic = f"{self.prefix}-produce-{codec}"
        self._setup_topic(topic)
        headers = self._at_least((0, 11))
        offsets = self._write(topic, 0, RECORD_COUNT, headers=headers, **config)
        consumer = self._consumer()
        try:
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            consumer.seek_to_beginning(tp)
            records = self._read(consumer, RECORD_COUNT)
        finally:
            consumer.close()
        observed = {"first_offset": offsets[0], "last_offset": offsets[-1], "read": len(records),
                    "round_trip": round_trips([(r.key, r.value) for r in records]), "idempotent": idempotent}
        if headers:  # record headers came with Kafka 0.11's message format v2
            observed["headers_round_trip"] = all(
                list(r.headers) == [("i", str(i).encode())] for i, r in enumerate(records))
        return observed

    def group_consume_commit(self) -> dict[str, Any]:
        topic = f"{self.prefix}-group"
        group = f"{self.prefix}-g"
        self._setup_topic(topic)
        self._write(topic, 0, RECORD_COUNT)
        tp = TopicPartition(topic, 0)
        first = self._consumer(group_id=group)
        try:
            first.subscribe([topic])
            records = self._read(first, RECORD_COUNT, timeout_s=15)
            first.commit()
            committed = first.committed(tp)
        finally:
            first.close()
        self._write(topic, RECORD_COUNT, SECOND_BATCH)
        second = self._consumer(group_id=group)
        try:
            second.subscribe([topic])
            later = self._read(second, SECOND_BATCH, timeout_s=15)
        finally:
            second.close()
        return {"read": len(records), "committed": committed, "second_read": len(later),
                "second_first_offset": later[0].offset if later else None,
                "second_round_trip": round_trips([(r.key, r.value) for r in later], RECORD_COUNT)}

    def transactions(self) -> dict[str, Any]:
        if not self._at_least((0, 11)):
            raise Unsupported("transactions need Kafka 0.11 (api_version pinned to 0.10)")
        topic = f"{self.prefix}-txn"
        self._setup_topic(topic)
        producer = self._producer(transactional_id=f"{self.prefix}-tx", enable_idempotence=True)
        try:
            producer.init_transactions()
            for commit, start in ((True, 0), (False, TXN_RECORDS)):
                producer.begin_transaction()
                for i in range(start, start + TXN_RECORDS):
                    producer.send(topic, key=record(i)[0], value=record(i)[1], partition=0)
                producer.flush(10)
                if commit:
                    producer.commit_transaction()
                else:
                    producer.abort_transaction()
        finally:
            producer.close(timeout=5)
        counts = {}
        for isolation in ("read_committed", "read_uncommitted"):
            consumer = self._consumer(isolation_level=isolation)
            try:
                tp = TopicPartition(topic, 0)
                consumer.assign([tp])
                consumer.seek_to_beginning(tp)
                expected = TXN_RECORDS if isolation == "read_committed" else 2 * TXN_RECORDS
                records = self._read(consumer, expected, timeout_s=5)
                # Nothing more arrives: poll once more for records past the expected count.
                records.extend(r for batch in consumer.poll(timeout_ms=500).values() for r in batch)
                counts[isolation] = len(records)
            finally:
                consumer.close()
        return counts

    def admin_describe_configs(self) -> dict[str, Any]:
        if not self._at_least((0, 11)):
            raise Unsupported("DescribeConfigs needs Kafka 0.11 (api_version pinned to 0.10)")
        topic = f"{self.prefix}-configs"
        self._setup_topic(topic)
        admin = self._admin()
        try:
            def describe() -> dict[str, Any]:
                result = admin.describe_configs(
                    [ConfigResource(ConfigResourceType.TOPIC, topic, ["retention.ms", "cleanup.policy"])],
                    config_filter="all")
                return result["topic"][topic]

            before = describe()
            broker = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "1", ["compression.type"])],
                                            config_filter="all")["broker"]["1"]
            altered = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic,
                                                          {"retention.ms": RETENTION_MS_AFTER})])
            after = describe()
            return {
                "retention_ms_before": [before["retention.ms"]["value"], before["retention.ms"]["config_source"]],
                "retention_ms_after": [after["retention.ms"]["value"], after["retention.ms"]["config_source"]],
                "cleanup_policy": [before["cleanup.policy"]["value"], before["cleanup.policy"]["config_source"]],
                "broker_compression_type": broker["compression.type"]["value"],
                "alter_result": str(altered["topic"][topic]),
            }
        finally:
            admin.close()

    def error_unknown_topic(self) -> dict[str, Any]:
        topic = f"{self.prefix}-missing"
        observed = {}
        if self._at_least((0, 10, 1)):
            admin = self._admin()
            try:
                code = admin.describe_topics([topic])[0]["error_code"]
                observed["describe_error"] = kerrors.for_code(code).__name__ if code else "none"
            finally:
                admin.close()
        producer = self._producer(max_block_ms=3000,
                                  **({"allow_auto_create_topics": False} if self._at_least((0, 11)) else {}))
        try:
            producer.send(topic, b"v").get(timeout=10)
            observed["error"] = "none"
        except kerrors.KafkaError as exc:
            observed["error"] = _error_name(exc)
        finally:
            producer.close(timeout=5)
        return observed

    def error_fenced_producer(self) -> dict[str, Any]:
        if not self._at_least((0, 11)):
            raise Unsupported("transactions need Kafka 0.11 (api_version pinned to 0.10)")
        topic = f"{self.prefix}-fenced"
        self._setup_topic(topic)
        txn_id = f"{self.prefix}-fenced-tx"
        first = self._producer(transactional_id=txn_id, enable_idempotence=True)
        second = None
        try:
            first.init_transactions()
            first.begin_transaction()
            first.send(topic, b"first", partition=0).get(timeout=10)
            second = self._producer(transactional_id=txn_id, enable_idempotence=True)
            second.init_transactions()
            try:
                first.send(topic, b"again", partition=0).get(timeout=10)
                first.commit_transaction()
                return {"error": "none"}
            except kerrors.KafkaError as exc:
                return {"error": _error_name(exc)}
        finally:
            first.close(timeout=5)
            if second is not None:
                second.close(timeout=5)

    def error_not_authorized(self) -> dict[str, Any]:
        require_authorizer()
        topic = f"{self.prefix}-denied"
        self._setup_topic(topic)
        admin = self._admin(pinned=False)
        try:
            admin.create_acls([ACL(principal="User:ANONYMOUS", host="*", operation=ACLOperation.ALL,
                                   permission_type=ACLPermissionType.DENY,
                                   resource_pattern=ResourcePattern(ResourceType.TOPIC, topic))])
        finally:
            admin.close()
        producer = self._producer(max_block_ms=5000)
        try:
            producer.send(topic, b"v", partition=0).get(timeout=10)
            return {"error": "none"}
        except kerrors.KafkaError as exc:
            return {"error": _error_name(exc)}
        finally:
            producer.close(timeout=5)
