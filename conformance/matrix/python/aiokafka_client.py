"""aiokafka running the matrix's scenarios (each scenario is one asyncio.run in its own thread)."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Awaitable, Callable, TypeVar

import aiokafka
import aiokafka.errors as aerrors
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from scenario_base import (
    RECORD_COUNT,
    RETENTION_MS_AFTER,
    SECOND_BATCH,
    TXN_RECORDS,
    Unsupported,
    record,
    require_authorizer,
    round_trips,
)

T = TypeVar("T")
TIMEOUTS = {"request_timeout_ms": 10000}


def _sync(coro_fn: Callable[..., Awaitable[T]]) -> Callable[..., T]:
    def run(*args: Any) -> T:
        return asyncio.run(coro_fn(*args))

    run.__name__ = coro_fn.__name__
    return run


def _error_code_name(code: int) -> str:
    return aerrors.for_code(code).__name__


class AiokafkaClient:
    """The scenarios with aiokafka's producer, consumer and admin client."""

    def __init__(self, bootstrap: str, prefix: str) -> None:
        self.bootstrap = bootstrap
        self.prefix = prefix
        self.version = aiokafka.__version__

    async def _admin(self) -> AIOKafkaAdminClient:
        admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap, **TIMEOUTS)
        await admin.start()
        return admin

    async def _setup_topic(self, name: str, partitions: int = 1) -> None:
        admin = await self._admin()
        try:
            response = await admin.create_topics([NewTopic(name, partitions, 1)])
            _, code, *_ = response.topic_errors[0]
            if code:
                raise aerrors.for_code(code)(f"creating {name}")
        finally:
            await admin.close()

    async def _producer(self, **config: Any) -> AIOKafkaProducer:
        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, acks="all", **TIMEOUTS, **config)
        await producer.start()
        return producer

    async def _consumer(self, *topics: str, **config: Any) -> AIOKafkaConsumer:
        settings = {"auto_offset_reset": "earliest", "enable_auto_commit": False, **TIMEOUTS, **config}
        consumer = AIOKafkaConsumer(*topics, bootstrap_servers=self.bootstrap, **settings)
        await consumer.start()
        return consumer

    async def _write(self, topic: str, start: int, count: int, **config: Any) -> list[int]:
        producer = await self._producer(**config)
        try:
            futures = [await producer.send(topic, key=record(i)[0], value=record(i)[1], partition=0,
                                           headers=[("i", str(i).encode())])
                       for i in range(start, start + count)]
            return [(await future).offset for future in futures]
        finally:
            await producer.stop()

    async def _read(self, consumer: AIOKafkaConsumer, count: int, timeout_s: float = 10.0) -> list[Any]:
        records: list[Any] = []
        deadline = time.monotonic() + timeout_s
        while len(records) < count and time.monotonic() < deadline:
            for batch in (await consumer.getmany(timeout_ms=500)).values():
                records.extend(batch)
        return records

    async def _read_assigned(self, topic: str, count: int, **config: Any) -> list[Any]:
        consumer = await self._consumer(**config)
        try:
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            records = await self._read(consumer, count, timeout_s=5)
            for batch in (await consumer.getmany(timeout_ms=500)).values():
                records.extend(batch)
            return records
        finally:
            await consumer.stop()

    @_sync
    async def metadata(self) -> dict[str, Any]:
        admin = await self._admin()
        try:
            cluster = await admin.describe_cluster()
            topics = await admin.list_topics()
            return {"brokers": len(cluster["brokers"]), "controller": cluster.get("controller_id", -1) >= 0,
                    "topics_listed": isinstance(topics, list)}
        finally:
            await admin.close()

    @_sync
    async def create_delete_topic(self) -> dict[str, Any]:
        topic = f"{self.prefix}-created"
        admin = await self._admin()
        try:
            await admin.create_topics([NewTopic(topic, 3, 1)])
            described = await admin.describe_topics([topic])
            partitions = len(described[0]["partitions"])
            response = await admin.create_topics([NewTopic(topic, 3, 1)])
            code = response.topic_errors[0][1]
            twice = _error_code_name(code) if code else "none"
            await admin.delete_topics([topic])
            gone = False
            for _ in range(50):
                if topic not in await admin.list_topics():
                    gone = True
                    break
                await asyncio.sleep(0.1)
            return {"partitions": partitions, "create_twice_error": twice, "gone_after_delete": gone}
        finally:
            await admin.close()

    def produce(self, codec: str) -> dict[str, Any]:
        return asyncio.run(self._produce(codec))

    async def _produce(self, codec: str) -> dict[str, Any]:
        topic = f"{self.prefix}-produce-{codec}"
        await self._setup_topic(topic)
        config: dict[str, Any] = {"enable_idempotence": True}
        if codec != "none":
            config["compression_type"] = codec
        offsets = await self._write(topic, 0, RECORD_COUNT, **config)
        records = await self._read_assigned(topic, RECORD_COUNT)
        return {"first_offset": offsets[0], "last_offset": offsets[-1], "read": len(records),
                "round_trip": round_trips([(r.key, r.value) for r in records]), "idempotent": True,
                "headers_round_trip": all(list(r.headers) == [("i", str(i).encode())]
                                          for i, r in enumerate(records))}

    @_sync
    async def group_consume_commit(self) -> dict[str, Any]:
        topic = f"{self.prefix}-group"
        group = f"{self.prefix}-g"
        await self._setup_topic(topic)
        await self._write(topic, 0, RECORD_COUNT)
        tp = TopicPartition(topic, 0)
        first = await self._consumer(topic, group_id=group)
        try:
            records = await self._read(first, RECORD_COUNT, timeout_s=15)
            await first.commit()
            committed = await first.committed(tp)
        finally:
            await first.stop()
        await self._write(topic, RECORD_COUNT, SECOND_BATCH)
        second = await self._consumer(topic, group_id=group)
        try:
            later = await self._read(second, SECOND_BATCH, timeout_s=15)
        finally:
            await second.stop()
        return {"read": len(records), "committed": committed, "second_read": len(later),
                "second_first_offset": later[0].offset if later else None,
                "second_round_trip": round_trips([(r.key, r.value) for r in later], RECORD_COUNT)}

    @_sync
    async def transactions(self) -> dict[str, Any]:
        topic = f"{self.prefix}-txn"
        await self._setup_topic(topic)
        producer = await self._producer(transactional_id=f"{self.prefix}-tx", enable_idempotence=True)
        try:
            for commit, start in ((True, 0), (False, TXN_RECORDS)):
                await producer.begin_transaction()
                for i in range(start, start + TXN_RECORDS):
                    await producer.send(topic, key=record(i)[0], value=record(i)[1], partition=0)
                if commit:
                    await producer.commit_transaction()
                else:
                    await producer.abort_transaction()
        finally:
            await producer.stop()
        committed = await self._read_assigned(topic, TXN_RECORDS, isolation_level="read_committed")
        uncommitted = await self._read_assigned(topic, 2 * TXN_RECORDS, isolation_level="read_uncommitted")
        return {"read_committed": len(committed), "read_uncommitted": len(uncommitted)}

    @_sync
    async def admin_describe_configs(self) -> dict[str, Any]:
        topic = f"{self.prefix}-configs"
        await self._setup_topic(topic)
        admin = await self._admin()
        try:
            async def describe(kind: ConfigResourceType, name: str, keys: list[str]) -> dict[str, list[str]]:
                responses = await admin.describe_configs([ConfigResource(kind, name, dict.fromkeys(keys))])
                entries = {}
                for response in responses:
                    for resource in response.resources:
                        error_code, _, _, _, configs = resource[:5]
                        if error_code:
                            raise aerrors.for_code(error_code)(f"describe configs of {name}")
                        for config in configs:
                            # v1+: name, value, read_only, config_source, is_sensitive, synonyms
                            entries[config[0]] = [config[1], _SOURCES.get(config[3], str(config[3]))]
                return entries

            before = await describe(ConfigResourceType.TOPIC, topic, ["retention.ms", "cleanup.policy"])
            broker = await describe(ConfigResourceType.BROKER, "1", ["compression.type"])
            responses = await admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic,
                                                                  {"retention.ms": RETENTION_MS_AFTER})])
            codes = [resource[0] for response in responses for resource in response.resources]
            after = await describe(ConfigResourceType.TOPIC, topic, ["retention.ms", "cleanup.policy"])
            return {"retention_ms_before": before["retention.ms"], "retention_ms_after": after["retention.ms"],
                    "cleanup_policy": before["cleanup.policy"], "broker_compression_type": broker["compression.type"][0],
                    "alter_result": [_error_code_name(c) if c else "OK" for c in codes]}
        finally:
            await admin.close()

    @_sync
    async def error_unknown_topic(self) -> dict[str, Any]:
        topic = f"{self.prefix}-missing"
        admin = await self._admin()
        try:
            described = await admin.describe_topics([topic])
            code = described[0]["error_code"]
            describe_error = _error_code_name(code) if code else "none"
        finally:
            await admin.close()
        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, request_timeout_ms=3000)
        await producer.start()
        try:
            await asyncio.wait_for(producer.send_and_wait(topic, b"v"), 10)
            produce_error = "none"
        except aerrors.KafkaError as exc:
            produce_error = type(exc).__name__
        finally:
            await producer.stop()
        return {"error": produce_error, "describe_error": describe_error}

    @_sync
    async def error_fenced_producer(self) -> dict[str, Any]:
        topic = f"{self.prefix}-fenced"
        await self._setup_topic(topic)
        txn_id = f"{self.prefix}-fenced-tx"
        first = await self._producer(transactional_id=txn_id, enable_idempotence=True)
        second = None
        try:
            await first.begin_transaction()
            await first.send_and_wait(topic, b"first", partition=0)
            second = await self._producer(transactional_id=txn_id, enable_idempotence=True)
            try:
                await first.send_and_wait(topic, b"again", partition=0)
                await first.commit_transaction()
                return {"error": "none"}
            except aerrors.KafkaError as exc:
                return {"error": type(exc).__name__}
        finally:
            await first.stop()
            if second is not None:
                await second.stop()

    @_sync
    async def error_not_authorized(self) -> dict[str, Any]:
        require_authorizer()
        topic = f"{self.prefix}-denied"
        await self._setup_topic(topic)
        _deny_all_with_kafka_python(self.bootstrap, topic)
        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, request_timeout_ms=5000)
        await producer.start()
        try:
            await asyncio.wait_for(producer.send_and_wait(topic, b"v", partition=0), 10)
            return {"error": "none"}
        except aerrors.KafkaError as exc:
            return {"error": type(exc).__name__}
        finally:
            await producer.stop()


# DescribeConfigs v1+ config_source numbers (Kafka's ConfigSource enum).
_SOURCES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
            4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG",
            7: "CLIENT_METRICS_CONFIG", 8: "GROUP_CONFIG"}


def _deny_all_with_kafka_python(bootstrap: str, topic: str) -> None:
    """aiokafka's admin client has no CreateAcls; the ACL is set-up, so kafka-python's admin makes it."""
    try:
        from kafka import KafkaAdminClient
        from kafka.admin import ACL, ACLOperation, ACLPermissionType, ResourcePattern, ResourceType
    except ImportError as exc:
        raise Unsupported(f"aiokafka has no CreateAcls and kafka-python is not importable: {exc}") from exc
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, **TIMEOUTS)
    try:
        admin.create_acls([ACL(principal="User:ANONYMOUS", host="*", operation=ACLOperation.ALL,
                               permission_type=ACLPermissionType.DENY,
                               resource_pattern=ResourcePattern(ResourceType.TOPIC, topic))])
    finally:
        admin.close()
