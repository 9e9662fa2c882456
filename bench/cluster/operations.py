#!/usr/bin/env python3
"""Cluster operations on a data set of --gb gigabytes (default 1), on 3 local kafkapy brokers.

One ZooKeeper-mode cluster (kafkapy.devcluster.LocalCluster: ZooKeeper and `python -m kafkapy
serve` processes on 127.0.0.1, disk log dirs). A topic of --partitions partitions, all on broker 1
(replication factor 1), is filled with --gb GB of 1 KiB random records; then, each timed from the
request to the moment the cluster shows it done:

  1. move:       reassign every partition from [1] to [2, 3] (each byte copied twice),
                 done = ListPartitionReassignments empty and every ISR = [2, 3];
  2. raise RF:   [2, 3] -> [2, 3, 1] (a third copy), done = ISR of 3 everywhere;
  3. lower RF:   -> [3], done = replicas [3] and brokers 1 and 2 hold no files of the topic;
  4. preferred election after a leader move (ElectLeaders PREFERRED on an RF 3 copy of the topic);
  5. delete:     DeleteTopics of the RF 3 topic, done = no broker holds any of its files.

Every operation is checked: the records read back at the end of each step (count and a sample of
offsets) match what was produced. Everything listens on loopback only, every wait is bounded and
every process is stopped on the way out; the work dir is removed unless --keep.

    python bench/cluster/operations.py              # 1 GB (about 5 min here)
    python bench/cluster/operations.py --gb 0.1     # smoke run
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
sys.path.insert(0, str(REPO_ROOT))

from kafkapy.devcluster.brokers import LocalCluster  # noqa: E402

RECORD = 1024
OVERRIDES = {"zookeeper.session.timeout.ms": "6000", "auto.leader.rebalance.enable": "false",
             "log.segment.bytes": str(256 * 1024 * 1024)}


def wait(predicate, timeout: float, what: str, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")


def topic_bytes(cluster: LocalCluster, broker: int, topic: str) -> int:
    total = 0
    for part in cluster.broker(broker).log_dir.glob(f"{topic}-*"):
        total += sum(f.stat().st_size for f in part.glob("*.log"))
    return total


def describe(admin, topic: str) -> dict[int, tuple[int, tuple[int, ...], tuple[int, ...]]]:
    meta = admin.list_topics(topic, timeout=10).topics.get(topic)
    if meta is None or meta.error is not None:
        return {}
    return {p: (m.leader, tuple(m.replicas), tuple(m.isrs)) for p, m in meta.partitions.items()}


def produce(bootstrap: str, topic: str, partitions: int, total_bytes: int) -> tuple[int, float]:
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 20, "batch.size": 1_000_000,
                         "queue.buffering.max.messages": 500_000, "compression.type": "none"})
    failed = []
    payload = os.urandom(RECORD)
    count = total_bytes // RECORD
    started = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, payload, partition=i % partitions,
                                 on_delivery=lambda err, _m: err and failed.append(err))
                break
            except BufferError:
                producer.poll(0.01)
        if i % 10000 == 0:
            producer.poll(0)
    left = producer.flush(300)
    if left or failed:
        raise RuntimeError(f"produce: {left} undelivered, {len(failed)} failed ({failed[:1]})")
    return count, time.perf_counter() - started


def end_offsets(bootstrap: str, topic: str, partitions: int) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-ops"})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)]
    finally:
        consumer.close()


def reassign_and_wait(kadmin, admin, topic: str, partitions: int, target: list[int], done, timeout: float) -> float:
    from kafka import TopicPartition as KTP
    started = time.perf_counter()
    result = kadmin.alter_partition_reassignments({KTP(topic, p): target for p in range(partitions)})
    bad = {tp: err for tp, err in result.items() if err is not None}
    if bad:
        raise RuntimeError(f"reassignment to {target} refused: {bad}")
    wait(lambda: not kadmin.list_partition_reassignments(), timeout, f"reassignment to {target}", 0.1)
    wait(lambda: done(describe(admin, topic)), 60, f"metadata after reassignment to {target}", 0.1)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gb", type=float, default=1.0)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--json", default=str(REPO_ROOT / "build" / "bench" / "cluster-operations.json"))
    args = parser.parse_args()
    from confluent_kafka.admin import AdminClient
    from kafka.admin import KafkaAdminClient

    work = Path(tempfile.mkdtemp(prefix="kafkapy-bench-ops-"))
    results: dict[str, object] = {"gb": args.gb, "partitions": args.partitions, "record_bytes": RECORD}
    ok = False
    try:
        with LocalCluster(work, brokers=3, overrides=OVERRIDES) as cluster:
            cluster.start(90)
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
            kadmin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=60000)
            topic, n = "ops", args.partitions
            kadmin.create_topics({topic: {"assignments": {p: [1] for p in range(n)}}}, timeout_ms=60000)
            wait(lambda: len(d := describe(admin, topic)) == n and all(s[0] == 1 for s in d.values()), 60, "topic")
            count, seconds = produce(cluster.bootstrap, topic, n, int(args.gb * 1e9))
            size = topic_bytes(cluster, 1, topic)
            results["produce"] = {"records": count, "seconds": seconds, "bytes": size}
            print(f"produced {count} records, {size / 1e6:.0f} MB on broker 1 in {seconds:.1f} s", flush=True)
            ends = end_offsets(cluster.bootstrap, topic, n)

            def step(name: str, target: list[int], done, copied_bytes: int, timeout: float = 1800) -> None:
                seconds = reassign_and_wait(kadmin, admin, topic, n, target, done, timeout)
                assert end_offsets(cluster.bootstrap, topic, n) == ends, f"{name}: end offsets changed"
                results[name] = {"seconds": seconds, "copied_bytes": copied_bytes,
                                 "mb_per_s": copied_bytes / 1e6 / seconds if copied_bytes else None}
                rate = f", {copied_bytes / 1e6 / seconds:.0f} MB/s copied" if copied_bytes else ""
                print(f"{name}: {seconds:.1f} s{rate}", flush=True)

            step("move [1] -> [2, 3]", [2, 3],
                 lambda d: all(s[1] == (2, 3) and sorted(s[2]) == [2, 3] for s in d.values()), 2 * size)
            wait(lambda: topic_bytes(cluster, 1, topic) == 0, 60, "broker 1's copy deleted")
            step("raise RF 2 -> 3", [2, 3, 1], lambda d: all(len(s[2]) == 3 for s in d.values()), size)
            started = time.perf_counter()
            step("lower RF 3 -> 1", [3], lambda d: all(s[1] == (3,) for s in d.values()), 0)
            wait(lambda: topic_bytes(cluster, 1, topic) == topic_bytes(cluster, 2, topic) == 0, 120,
                 "copies on brokers 1 and 2 deleted")
            results["lower RF 3 -> 1"]["seconds_until_files_gone"] = time.perf_counter() - started

            # an RF 3 topic for the election and the deletion
            step("raise RF 1 -> 3", [3, 1, 2], lambda d: all(len(s[2]) == 3 for s in d.values()), 2 * size)
            from kafka import TopicPartition as KTP
            kadmin.alter_partition_reassignments({KTP(topic, p): [1, 2, 3] for p in range(n)})  # preferred = 1
            wait(lambda: not kadmin.list_partition_reassignments(), 60, "reorder")
            started = time.perf_counter()
            from confluent_kafka import ElectionType, TopicPartition
            futures = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, p) for p in range(n)])
            futures.result(60)
            wait(lambda: all(s[0] == 1 for s in describe(admin, topic).values()), 60, "preferred leaders")
            results["preferred election"] = {"seconds": time.perf_counter() - started}
            print(f"preferred election: {results['preferred election']['seconds'] * 1000:.0f} ms", flush=True)

            started = time.perf_counter()
            admin.delete_topics([topic])[topic].result(120)
            wait(lambda: all(not list(cluster.broker(b).log_dir.glob(f"{topic}-*")) for b in (1, 2, 3)), 300,
                 "every copy deleted")
            results["delete RF 3"] = {"seconds": time.perf_counter() - started, "bytes": 3 * size}
            print(f"delete (RF 3, {3 * size / 1e6:.0f} MB): {results['delete RF 3']['seconds']:.1f} s", flush=True)
            kadmin.close()
        ok = True
    finally:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(results, indent=2))
        if ok and not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"work dir kept: {work}", flush=True)
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
