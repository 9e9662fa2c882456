"""The matrix's scenario contract (conformance/matrix/README.md) run by confluent-kafka (librdkafka).

    python -m conformance.differential.confluent_scenarios BOOTSTRAP PREFIX

prints one JSON line per scenario on stdout, in the contract's order; librdkafka's log lines go to
stderr. Written as the differential runs' first client before the Java matrix program existed, and
kept as one more differential cell. Errors are librdkafka's error names (KafkaError.name(), e.g.
"TOPIC_ALREADY_EXISTS"), the canonical form of what this client observes.
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time
import traceback
from typing import Callable

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    OffsetSpec,
    ResourcePatternType,
    ResourceType,
)

SCENARIO_TIMEOUT_S = 25.0
RECORDS = 100
MAX_TIMESTAMP_RECORD = 42
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


class Unsupported(Exception):
    """The scenario cannot run with this client or broker set-up (status "unsupported")."""


def _error_name(exc: BaseException) -> str:
    """A client-side error as this client names it: librdkafka's error name, else the class name."""
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0].name()
    if isinstance(exc, KafkaError):
        return exc.name()
    return type(exc).__name__


class Scenarios:
    def __init__(self, bootstrap: str, prefix: str):
        self.bootstrap = bootstrap
        self.prefix = prefix
        self.admin = AdminClient({"bootstrap.servers": bootstrap})

    # -- helpers ---------------------------------------------------------------------------------------

    def _config(self, **extra: object) -> dict:
        return {"bootstrap.servers": self.bootstrap, **{k.replace("_", "."): v for k, v in extra.items()}}

    def create_topic(self, name: str, partitions: int = 1, config: dict | None = None) -> None:
        futures = self.admin.create_topics([NewTopic(name, partitions, 1, config=config or {})], operation_timeout=15)
        futures[name].result(timeout=20)
        self.wait_topic(name, partitions)

    def wait_topic(self, name: str, partitions: int, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            md = self.admin.list_topics(topic=name, timeout=5).topics.get(name)
            if md is not None and md.error is None and len(md.partitions) == partitions and all(
                    p.leader >= 0 for p in md.partitions.values()):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {name} not in metadata with {partitions} partitions")
            time.sleep(0.1)

    def produce(self, topic: str, count: int, *, key_prefix: str = "k", timestamps: list[int] | None = None,
                **config: object) -> list[int]:
        producer = Producer(self._config(acks="all", enable_idempotence=True, linger_ms=5, **config))
        offsets: list[int] = []
        errors: list[str] = []

        def delivered(err: KafkaError | None, msg) -> None:
            if err is not None:
                errors.append(err.name())
            else:
                offsets.append(msg.offset())

        for i in range(count):
            producer.produce(topic, key=f"{key_prefix}{i}".encode(), value=f"v{i}".encode() * 10,
                             on_delivery=delivered, **({"timestamp": timestamps[i]} if timestamps else {}))
        remaining = producer.flush(15)
        if errors or remaining:
            raise RuntimeError(f"delivery errors {sorted(set(errors))}, {remaining} undelivered")
        return sorted(offsets)

    def read(self, topic: str, count: int, *, isolation: str = "read_uncommitted", idle_s: float = 3.0,
             partition: int = 0) -> list:
        consumer = Consumer(self._config(group_id=f"{self.prefix}-reader", enable_auto_commit=False,
                                         isolation_level=isolation))
        try:
            consumer.assign([TopicPartition(topic, partition, 0)])
            messages = []
            last = time.monotonic()
            while len(messages) < count and time.monotonic() - last < idle_s:
                msg = consumer.poll(0.2)
                if msg is None:
                    continue
                if msg.error():
                    raise KafkaException(msg.error())
                messages.append(msg)
                last = time.monotonic()
            return messages
        finally:
            consumer.close()

    # -- the scenarios ---------------------------------------------------------------------------------

    def metadata(self) -> dict:
        md = self.admin.list_topics(timeout=10)
        return {"brokers": len(md.brokers), "broker_ids": sorted(md.brokers), "controller": md.controller_id >= 0}

    def create_delete_topic(self) -> dict:
        name = f"{self.prefix}-cdt"
        self.create_topic(name, 3)
        partitions = len(self.admin.list_topics(topic=name, timeout=5).topics[name].partitions)
        description = self.admin.describe_topics(_topic_collection([name]), request_timeout=10)[name].result(15)
        described = [{"partition": p.id, "leader": p.leader.id, "replicas": [r.id for r in p.replicas],
                      "isr": [r.id for r in p.isr]} for p in sorted(description.partitions, key=lambda p: p.id)]
        again = self._create_error(NewTopic(name, 3, 1))
        invalid = {
            "replication_factor_3": self._create_error(NewTopic(f"{name}-rf3", 1, 3)),
            "partitions_0": self._create_error(NewTopic(f"{name}-p0", 0, 1)),
            "bad_config_value": self._create_error(NewTopic(f"{name}-cfg", 1, 1, config={"retention.ms": "soon"})),
            "unknown_config": self._create_error(NewTopic(f"{name}-ucfg", 1, 1, config={"no.such.config": "1"})),
            "bad_name": self._create_error(NewTopic(f"{name}/slash", 1, 1)),
        }
        self.admin.delete_topics([name], operation_timeout=15)[name].result(timeout=20)
        deadline = time.monotonic() + 15
        while True:
            md = self.admin.list_topics(topic=name, timeout=5).topics.get(name)
            gone_error = md.error.name() if md is not None and md.error is not None else None
            if md is None or gone_error is not None:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"{name} still in metadata 15 s after its deletion")
            time.sleep(0.1)
        return {"partitions": partitions, "create_again": again, "after_delete": gone_error or "absent",
                "described": described, "internal": description.is_internal, "create_errors": invalid}

    def _create_error(self, topic: NewTopic) -> str:
        try:
            self.admin.create_topics([topic], operation_timeout=10)[topic.topic].result(timeout=15)
        except KafkaException as exc:
            return _error_name(exc)
        return "none"

    def produce_codec(self, codec: str) -> dict:
        topic = f"{self.prefix}-p-{codec}"
        self.create_topic(topic, 1)
        # Record timestamps of our own (base + i, record 42 the latest), so that ListOffsets' answers are
        # the same whichever broker: not the producer clock's, which ties records within a millisecond.
        # With compression, ties instead: records 10-99 share the latest timestamp (the answer is the first).
        base = int(time.time() * 1000) - 60_000
        if codec == "none":
            timestamps = [base + i for i in range(RECORDS)]
            timestamps[MAX_TIMESTAMP_RECORD] = base + 10 * RECORDS
        else:
            timestamps = [base] * 10 + [base + 100] * (RECORDS - 10)
        offsets = self.produce(topic, RECORDS, compression_type=codec, timestamps=timestamps)
        messages = self.read(topic, RECORDS)
        round_trip = all(m.key() == f"k{i}".encode() and m.value() == f"v{i}".encode() * 10
                         for i, m in enumerate(messages))
        observed = {"acked": len(offsets), "first_offset": offsets[0], "last_offset": offsets[-1],
                    "read": len(messages), "round_trip": round_trip and len(messages) == RECORDS}
        tp = TopicPartition(topic, 0)
        if codec != "none":
            observed["list_offsets_max_timestamp"] = self.admin.list_offsets(
                {tp: OffsetSpec.max_timestamp()})[tp].result(15).offset
        else:
            for spec_name, spec in (("earliest", OffsetSpec.earliest()), ("latest", OffsetSpec.latest()),
                                    ("max_timestamp", OffsetSpec.max_timestamp()),
                                    ("for_time_of_50", OffsetSpec.for_timestamp(base + 50)),
                                    ("for_time_after_all", OffsetSpec.for_timestamp(base + 20 * RECORDS))):
                observed[f"list_offsets_{spec_name}"] = self.admin.list_offsets({tp: spec})[tp].result(15).offset
        return observed

    def group_consume_commit(self) -> dict:
        topic = f"{self.prefix}-gcc"
        group = f"{self.prefix}-g"
        self.create_topic(topic, 1)
        self.produce(topic, RECORDS)
        first = Consumer(self._config(group_id=group, enable_auto_commit=False, auto_offset_reset="earliest"))
        try:
            first.subscribe([topic])
            read = 0
            deadline = time.monotonic() + 15
            while read < RECORDS and time.monotonic() < deadline:
                msg = first.poll(0.2)
                if msg is not None and not msg.error():
                    read += 1
            first.commit(asynchronous=False)
        finally:
            first.close()
        self.produce(topic, 5, key_prefix="more")
        second = Consumer(self._config(group_id=group, enable_auto_commit=False, auto_offset_reset="earliest"))
        try:
            committed = second.committed([TopicPartition(topic, 0)], timeout=10)[0].offset
            second.subscribe([topic])
            starts_at = None
            deadline = time.monotonic() + 15
            while starts_at is None and time.monotonic() < deadline:
                msg = second.poll(0.2)
                if msg is not None and not msg.error():
                    starts_at = msg.offset()
        finally:
            second.close()
        return {"read": read, "committed": committed, "second_starts_at": starts_at}

    def transactions(self) -> dict:
        topic = f"{self.prefix}-tx"
        self.create_topic(topic, 1)
        producer = Producer(self._config(transactional_id=f"{self.prefix}-txid", linger_ms=5))
        producer.init_transactions(15)
        for outcome in ("commit", "abort"):
            producer.begin_transaction()
            for i in range(10):
                producer.produce(topic, key=f"{outcome}{i}".encode(), value=b"x")
            producer.flush(10)
            if outcome == "commit":
                producer.commit_transaction(15)
            else:
                producer.abort_transaction(15)
        committed = self.read(topic, 100, isolation="read_committed", idle_s=2.0)
        uncommitted = self.read(topic, 100, isolation="read_uncommitted", idle_s=2.0)
        low, high = Consumer(self._config(group_id=f"{self.prefix}-wm")).get_watermark_offsets(
            TopicPartition(topic, 0), timeout=10)
        return {"read_committed": len(committed),
                "committed_keys_ok": [m.key() for m in committed] == [f"commit{i}".encode() for i in range(10)],
                "read_uncommitted": len(uncommitted), "high_watermark": high}

    def admin_describe_configs(self) -> dict:
        topic = f"{self.prefix}-cfg"
        self.create_topic(topic, 1)

        def topic_entries() -> dict:
            resource = ConfigResource(ResourceType.TOPIC, topic)
            return self.admin.describe_configs([resource])[resource].result(timeout=15)

        def summary(entry) -> dict:
            return {"value": entry.value, "source": ConfigSource_name(entry.source),
                    "read_only": entry.is_read_only, "sensitive": entry.is_sensitive}

        before = topic_entries()
        broker = ConfigResource(ResourceType.BROKER, "1")
        broker_entries = self.admin.describe_configs([broker])[broker].result(timeout=15)
        resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
            ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)])
        self.admin.incremental_alter_configs([resource])[resource].result(timeout=15)
        after = topic_entries()
        return {
            "topic_configs": {name: [e.value, ConfigSource_name(e.source), e.is_read_only, e.is_sensitive]
                              for name, e in sorted(before.items())},
            "retention.ms_before": summary(before["retention.ms"]),
            "retention.ms_after": summary(after["retention.ms"]),
            "cleanup.policy": summary(before["cleanup.policy"]),
            "broker_num.partitions": summary(broker_entries["num.partitions"]),
            "broker_log.retention.hours": summary(broker_entries["log.retention.hours"]),
            "broker_min.insync.replicas": summary(broker_entries["min.insync.replicas"]),
        }

    def error_unknown_topic(self) -> dict:
        name = f"{self.prefix}-missing"
        md = self.admin.list_topics(topic=name, timeout=5).topics.get(name)
        metadata_error = md.error.name() if md is not None and md.error is not None else "none"
        try:
            self.admin.describe_topics(
                _topic_collection([name]), request_timeout=10)[name].result(timeout=15)
            describe_error = "none"
        except KafkaException as exc:
            describe_error = _error_name(exc)
        producer = Producer(self._config(allow_auto_create_topics=False, message_timeout_ms=5000,
                                         topic_metadata_propagation_max_ms=1000))
        errors: list[str] = []
        producer.produce(name, value=b"x", on_delivery=lambda err, msg: errors.append(err.name() if err else "none"))
        producer.flush(10)
        return {"metadata_error": metadata_error, "describe_error": describe_error,
                "produce_error": errors[0] if errors else "no delivery report"}

    def error_fenced_producer(self) -> dict:
        topic = f"{self.prefix}-fenced"
        self.create_topic(topic, 1)
        txid = f"{self.prefix}-fenced-txid"
        first = Producer(self._config(transactional_id=txid, linger_ms=0))
        first.init_transactions(15)
        first.begin_transaction()
        first.produce(topic, value=b"first")
        first.flush(10)
        second = Producer(self._config(transactional_id=txid, linger_ms=0))
        second.init_transactions(20)
        try:
            first.commit_transaction(15)
            fenced = {"error": "none"}
        except KafkaException as exc:
            err = exc.args[0]
            fenced = {"error": err.name(), "fatal": err.fatal(), "abortable": err.txn_requires_abort()}
        second.begin_transaction()
        second.produce(topic, value=b"second")
        second.commit_transaction(15)
        values = [m.value() for m in self.read(topic, 10, isolation="read_committed", idle_s=2.0)]
        return {**fenced, "read_committed_values": [v.decode() for v in values]}

    def error_not_authorized(self) -> dict:
        if os.environ.get("MATRIX_AUTHORIZER") != "1":
            raise Unsupported("no authorizer")
        topic = f"{self.prefix}-denied"
        self.create_topic(topic, 1)
        acl = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:ANONYMOUS", "*",
                         AclOperation.WRITE, AclPermissionType.DENY)
        self.admin.create_acls([acl])[acl].result(timeout=15)
        time.sleep(1.0)  # ACLs reach the authorizer asynchronously (ZooKeeper watch / metadata log)
        producer = Producer(self._config(acks="all", enable_idempotence=False, message_timeout_ms=8000,
                                         retries=0))
        errors: list[str] = []
        producer.produce(topic, value=b"x", on_delivery=lambda err, msg: errors.append(err.name() if err else "none"))
        producer.flush(12)
        return {"produce_error": errors[0] if errors else "no delivery report"}


def ConfigSource_name(source: int) -> str:  # noqa: N802 - mirrors confluent_kafka's enum name
    from confluent_kafka.admin import ConfigSource

    try:
        return ConfigSource(source).name
    except ValueError:
        return str(source)


def _topic_collection(names: list[str]):
    from confluent_kafka import TopicCollection

    return TopicCollection(names)


def _run_one(name: str, body: Callable[[], dict]) -> dict:
    result: dict = {}

    def target() -> None:
        try:
            result.update(status="pass", observed=body(), detail="")
        except Unsupported as exc:
            result.update(status="unsupported", observed={}, detail=str(exc))
        except BaseException as exc:  # noqa: BLE001 - every failure is this scenario's result line
            result.update(status="fail", observed={"error": _error_name(exc)},
                          detail=f"{type(exc).__name__}: {exc}")
            traceback.print_exc(file=sys.stderr)

    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    thread.join(SCENARIO_TIMEOUT_S)
    if thread.is_alive():
        return {"scenario": name, "status": "fail", "observed": {"error": "timeout"},
                "detail": f"did not finish within {SCENARIO_TIMEOUT_S:.0f} s"}
    return {"scenario": name, **result}


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: confluent_scenarios.py BOOTSTRAP PREFIX", file=sys.stderr)
        return 2
    scenarios = Scenarios(*argv)
    plan: list[tuple[str, Callable[[], dict]]] = [
        ("metadata", scenarios.metadata),
        ("create_delete_topic", scenarios.create_delete_topic),
        *[(f"produce_{codec}", (lambda c=codec: scenarios.produce_codec(c))) for codec in CODECS],
        ("group_consume_commit", scenarios.group_consume_commit),
        ("transactions", scenarios.transactions),
        ("admin_describe_configs", scenarios.admin_describe_configs),
        ("error_unknown_topic", scenarios.error_unknown_topic),
        ("error_fenced_producer", scenarios.error_fenced_producer),
        ("error_not_authorized", scenarios.error_not_authorized),
    ]
    only = set(filter(None, os.environ.get("MATRIX_SCENARIOS", "").split(",")))
    for name, body in plan:
        if only and name not in only:
            continue
        print(json.dumps(_run_one(name, body), sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    os._exit(code)  # a timed-out scenario's thread must not keep the program alive
