#!/usr/bin/env python3
"""Produce and consume throughput over PLAINTEXT vs SSL vs SASL_SSL, same run, same broker process.

One kafkapy broker (`python -m kafkapy serve`, fresh temporary log dir) with three listeners:
PLAINTEXT, SSL (server-authenticated TLS, certificates from conformance/tls_certs.py) and SASL_SSL
(PLAIN over TLS). confluent-kafka (librdkafka) clients produce into a fresh topic and read it all
back on each listener in turn; rounds interleave the listeners so drift hits them alike, and the
median round is reported with the broker's CPU per phase and the ratios to PLAINTEXT.
Each phase stops at --records records or --seconds seconds; the broker and temp files go at the end.

    python bench/security/bench_security.py                 # 1 KiB records, 1 and 8 partitions
    python bench/security/bench_security.py --quick         # smaller, for a smoke test
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "bench" / "broker"))

from broker_processes import process_tree_cpu_s  # noqa: E402  (bench/broker/broker_processes.py)

from conformance.broker_process import free_port, start_broker  # noqa: E402
from conformance.tls_certs import make_certs  # noqa: E402

CLIENT_TIMEOUT_S = 15.0
SASL_USER, SASL_PASSWORD = "bench", "bench-secret"


@dataclass
class Phase:
    records: int = 0
    seconds: float = 0.0
    broker_cpu_s: float = 0.0
    error: str | None = None

    def mib_s(self, record_bytes: int) -> float:
        return self.records * record_bytes / self.seconds / 2**20 if self.seconds else 0.0


def client_conf(protocol: str, ports: dict[str, int], certs) -> dict:
    conf = {"bootstrap.servers": f"127.0.0.1:{ports[protocol]}"}
    if protocol in ("SSL", "SASL_SSL"):
        conf.update({"security.protocol": protocol, "ssl.ca.location": str(certs.ca_pem)})
    if protocol == "SASL_SSL":
        conf.update({"sasl.mechanism": "PLAIN", "sasl.username": SASL_USER, "sasl.password": SASL_PASSWORD})
    return conf


def create_topic(conf: dict, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(CLIENT_TIMEOUT_S)
    deadline = time.monotonic() + CLIENT_TIMEOUT_S
    while time.monotonic() < deadline:
        meta = admin.list_topics(topic, timeout=CLIENT_TIMEOUT_S).topics.get(topic)
        if meta is not None and meta.error is None and len(meta.partitions) == partitions and all(
                p.leader >= 0 for p in meta.partitions.values()):
            return
        time.sleep(0.05)
    raise RuntimeError(f"topic {topic} has no leaders")


def produce(conf: dict, topic: str, partitions: int, record_bytes: int, max_records: int,
            max_seconds: float) -> Phase:
    from confluent_kafka import Producer

    producer = Producer({**conf, "acks": "1", "linger.ms": 5, "compression.type": "none",
                         "enable.idempotence": False, "queue.buffering.max.messages": 500_000,
                         "message.timeout.ms": int((max_seconds + CLIENT_TIMEOUT_S) * 1000)})
    outcome = {"ok": 0, "failed": 0, "error": None}

    def on_delivery(error, _message) -> None:
        if error is None:
            outcome["ok"] += 1
        else:
            outcome["failed"] += 1
            outcome["error"] = outcome["error"] or str(error)

    payload = os.urandom(record_bytes)
    started = time.perf_counter()
    stop_at = started + max_seconds
    sent = 0
    while sent < max_records and (sent & 1023 or time.perf_counter() < stop_at):
        try:
            producer.produce(topic, payload, partition=sent % partitions, on_delivery=on_delivery)
            sent += 1
        except BufferError:
            producer.poll(0.005)
        if not sent & 1023:
            producer.poll(0)
    remaining = producer.flush(CLIENT_TIMEOUT_S)
    phase = Phase(outcome["ok"], time.perf_counter() - started)
    if outcome["failed"] or remaining:
        phase.error = f"{outcome['failed']} failed, {remaining} undelivered: {outcome['error']}"
    return phase


def consume(conf: dict, topic: str, partitions: int, expected: int, max_seconds: float) -> Phase:
    """Read everything from the beginning (assign mode); timed from the first records to the last."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({**conf, "group.id": f"bench-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
                         "queued.min.messages": 2_000_000, "queued.max.messages.kbytes": 1_048_576,
                         "fetch.queue.backoff.ms": 10})
    received, first_batch, first_at, error = 0, 0, None, None
    try:
        started = time.perf_counter()
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        last_at = started
        while received < expected and time.perf_counter() < started + max_seconds:
            good = 0
            for message in consumer.consume(num_messages=10_000, timeout=0.2):
                if message.error():
                    error = error or str(message.error())
                else:
                    good += 1
            if good:
                last_at = time.perf_counter()
                if first_at is None:
                    first_at, first_batch = last_at, good
                received += good
    finally:
        consumer.close()
    steady = received - first_batch
    seconds = (last_at - first_at) * received / steady if first_at and steady > 0 and last_at > first_at else 0.0
    phase = Phase(received, seconds, 0.0, error)
    if received < expected:
        phase.error = f"only {received} of {expected} within {max_seconds:.0f} s"
    return phase


def with_cpu(pid: int, run) -> Phase:
    before = process_tree_cpu_s(pid)
    phase = run()
    phase.broker_cpu_s = process_tree_cpu_s(pid) - before
    return phase


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=400_000)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--record-bytes", type=int, default=1024)
    parser.add_argument("--partitions", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--protocols", nargs="+", default=["PLAINTEXT", "SSL", "SASL_SSL"])
    parser.add_argument("--quick", action="store_true", help="50k records, 3 s phases, one round")
    args = parser.parse_args(argv)
    if args.quick:
        args.records, args.seconds, args.rounds = 50_000, 3.0, 1

    with tempfile.TemporaryDirectory(prefix="kafkapy-bench-security-") as tmp:
        certs = make_certs(Path(tmp) / "certs")
        ports = {protocol: free_port() for protocol in ("PLAINTEXT", "SSL", "SASL_SSL")}
        listeners = ",".join(f"{p}://127.0.0.1:{port}" for p, port in ports.items())
        jaas = (f'org.apache.kafka.common.security.plain.PlainLoginModule required username="{SASL_USER}" '
                f'password="{SASL_PASSWORD}" user_{SASL_USER}="{SASL_PASSWORD}";')
        broker = start_broker({
            "listeners": listeners, "advertised.listeners": listeners,
            "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.broker_keystore),
            "sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas,
        }, work_dir=Path(tmp) / "broker", port=ports["PLAINTEXT"])
        results: dict[tuple[int, str], list[tuple[Phase, Phase]]] = {}
        try:
            for round_no in range(args.rounds):
                for partitions in args.partitions:
                    for protocol in args.protocols:
                        conf = client_conf(protocol, ports, certs)
                        topic = f"bench-{protocol.lower()}-{partitions}p-{uuid.uuid4().hex[:6]}"
                        try:
                            create_topic(conf, topic, partitions)
                            produced = with_cpu(broker.pid, lambda: produce(
                                conf, topic, partitions, args.record_bytes, args.records, args.seconds))
                            consumed = with_cpu(broker.pid, lambda: consume(
                                conf, topic, partitions, produced.records, args.seconds + 10))
                        except Exception as exc:  # noqa: BLE001  one failing listener must not end the run
                            produced = consumed = Phase(error=str(exc).splitlines()[0])
                        results.setdefault((partitions, protocol), []).append((produced, consumed))
                        print(f"round {round_no + 1} {partitions}p {protocol:9s} produce "
                              f"{produced.mib_s(args.record_bytes):7.1f} MiB/s  consume "
                              f"{consumed.mib_s(args.record_bytes):7.1f} MiB/s"
                              + (f"  ({produced.error or consumed.error})" if produced.error or consumed.error
                                 else ""), file=sys.stderr)
        finally:
            broker.close()

    print(f"\n{args.record_bytes}-byte records, acks=1, confluent-kafka, one broker; median of {args.rounds} "
          f"round(s); broker CPU = broker process CPU seconds per GiB of records moved in the phase\n")
    print("| partitions | listener | produce MiB/s | vs PLAINTEXT | broker CPU | consume MiB/s | vs PLAINTEXT "
          "| broker CPU |")
    print("|---|---|---|---|---|---|---|---|")
    for partitions in args.partitions:
        base = None
        for protocol in args.protocols:
            runs = results.get((partitions, protocol), [])
            ok = [(p, c) for p, c in runs if not p.error and not c.error]
            if not ok:
                error = next((p.error or c.error for p, c in runs), "no run")
                print(f"| {partitions} | {protocol} | failed: {error} | | | | | |")
                continue
            prod = statistics.median(p.mib_s(args.record_bytes) for p, _ in ok)
            cons = statistics.median(c.mib_s(args.record_bytes) for _, c in ok)
            prod_cpu = statistics.median(p.broker_cpu_s / (p.records * args.record_bytes / 2**30) for p, _ in ok)
            cons_cpu = statistics.median(c.broker_cpu_s / (c.records * args.record_bytes / 2**30) for _, c in ok)
            if protocol == "PLAINTEXT":
                base = (prod, cons)
            ratio = (lambda v, b: f"{v / b:.2f}x" if b else "")
            print(f"| {partitions} | {protocol} | {prod:.1f} | {ratio(prod, base[0]) if base else ''} | "
                  f"{prod_cpu:.2f} s | {cons:.1f} | {ratio(cons, base[1]) if base else ''} | {cons_cpu:.2f} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
