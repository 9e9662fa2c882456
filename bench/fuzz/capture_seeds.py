#!/usr/bin/env python3
"""Record real clients' requests as the seed corpus of the fuzz campaign (bench/fuzz/seed_requests.txt).

Starts a kafkapy broker whose advertised listener is a recording proxy, runs kafka-python and
confluent-kafka (librdkafka) through it — admin, idempotent and transactional producers, group
consumers with commits — and writes every distinct request frame the clients sent, one per line:
`api_key api_version hex(frame without its size prefix)`.

Usage: python bench/fuzz/capture_seeds.py [--out bench/fuzz/seed_requests.txt]
"""
from __future__ import annotations

import argparse
import asyncio
import hashlib
import struct
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from conformance.broker_process import free_port, start_broker  # noqa: E402

MAX_SEED_BYTES = 64 * 1024
TOPIC = "fuzz-known"


class RecordingProxy:
    """A TCP proxy on 127.0.0.1 that forwards to the broker and keeps each client request frame."""

    def __init__(self, port: int, target_port: int) -> None:
        self.port, self.target_port = port, target_port
        self.frames: dict[str, tuple[int, int, bytes]] = {}
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.server = self.loop.run_until_complete(asyncio.start_server(self._client, "127.0.0.1", self.port))
        self.ready.set()
        self.loop.run_forever()

    def start(self) -> None:
        self.thread.start()
        self.ready.wait(10)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.server.close)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)

        async def upstream() -> None:
            try:
                while True:
                    size_raw = await reader.readexactly(4)
                    body = await reader.readexactly(struct.unpack(">i", size_raw)[0])
                    if len(body) >= 4 and len(body) <= MAX_SEED_BYTES:
                        key, version = struct.unpack_from(">hh", body)
                        self.frames.setdefault(hashlib.sha1(body).hexdigest(), (key, version, body))
                    up_writer.write(size_raw + body)
                    await up_writer.drain()
            except (asyncio.IncompleteReadError, ConnectionError):
                pass
            finally:
                up_writer.close()

        async def downstream() -> None:
            try:
                while data := await up_reader.read(65536):
                    writer.write(data)
                    await writer.drain()
            except ConnectionError:
                pass
            finally:
                writer.close()

        await asyncio.gather(upstream(), downstream())


def attempt(call) -> None:
    """Run one client call for the requests it sends; its result or failure does not matter here."""
    try:
        call()
    except Exception as exc:   # noqa: BLE001 - a seed session records requests, it checks nothing
        print(f"  (client call failed: {type(exc).__name__}: {exc})")


def kafka_python_session(bootstrap: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewPartitions, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(TOPIC, 2, 1), NewTopic("fuzz-scratch", 1, 1)])
    admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, TOPIC)])
    admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, TOPIC, configs={"retention.ms": "3600000"})])
    admin.create_partitions({"fuzz-scratch": NewPartitions(2)})
    for call in (admin.list_groups, admin.describe_cluster, admin.list_transactions,
                 admin.describe_log_dirs, lambda: admin.describe_topic_partitions([TOPIC])):
        attempt(call)
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", compression_type="gzip")
    for i in range(20):
        producer.send(TOPIC, key=b"k%d" % i, value=b"v" * i, headers=[("h", b"x")])
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id="fuzz-kp-group",
                             auto_offset_reset="earliest", consumer_timeout_ms=3000)
    for _ in consumer:
        pass
    consumer.commit()
    consumer.close()
    attempt(lambda: admin.describe_groups(["fuzz-kp-group"]))
    attempt(lambda: admin.list_group_offsets("fuzz-kp-group"))
    admin.delete_topics(["fuzz-scratch"])
    admin.close()


def confluent_session(bootstrap: str) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "compression.type": "zstd"})
    for i in range(20):
        producer.produce(TOPIC, key=b"c%d" % i, value=b"w" * i)
    producer.flush(10)
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": "fuzz-txn"})
    txn.init_transactions(10)
    txn.begin_transaction()
    txn.produce(TOPIC, key=b"t", value=b"in a transaction")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "fuzz-ck-group", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    consumer.subscribe([TOPIC])
    deadline = time.monotonic() + 8
    while time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            consumer.commit(msg, asynchronous=False)
            break
    txn.send_offsets_to_transaction([TopicPartition(TOPIC, 0, 1)], consumer.consumer_group_metadata(), 10)
    txn.commit_transaction(10)
    consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=5)
    consumer.offsets_for_times([TopicPartition(TOPIC, 0, 0)], timeout=5)
    consumer.close()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.list_topics(timeout=5)
    admin.describe_cluster().result(10)
    for f in admin.list_consumer_groups().result(10).valid:
        pass
    admin.describe_consumer_groups(["fuzz-ck-group"])["fuzz-ck-group"].result(10)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("seed_requests.txt"))
    args = parser.parse_args(argv)
    proxy_port = free_port()
    listener = f"PLAINTEXT://127.0.0.1:{proxy_port}"
    broker = start_broker(overrides={"advertised.listeners": listener, "offsets.topic.num.partitions": "3"})
    proxy = RecordingProxy(proxy_port, broker.port)
    try:
        proxy.start()
        bootstrap = f"127.0.0.1:{proxy_port}"
        attempt(lambda: kafka_python_session(bootstrap))
        attempt(lambda: confluent_session(bootstrap))
    finally:
        proxy.stop()
        broker.close()
    frames = sorted(proxy.frames.values(), key=lambda f: (f[0], f[1], f[2]))
    args.out.write_text("".join(f"{key} {version} {body.hex()}\n" for key, version, body in frames))
    apis = sorted({(k, v) for k, v, _ in frames})
    print(f"wrote {len(frames)} request frames ({len(apis)} api/version pairs) to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
