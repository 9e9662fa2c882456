#!/usr/bin/env python3
"""Benchmark: how fast AlterReplicaLogDirs moves a partition between two log dirs of one broker.

A kafkapy broker (`python -m kafkapy serve`) runs with two log.dirs in one temporary directory
(same disk). One partition is filled to --size-mb with confluent-kafka (acks=1, 10 KiB records),
then moved to the other log dir with kafka-python's AlterReplicaLogDirs; the time runs until
DescribeLogDirs reports the partition only in the destination. While it moves, a second producer
(acks=all, 1 KiB records, one in flight) measures how long appends wait (the switch holds them).

Every phase is bounded in time; the broker process and the temporary directory are removed even
on failure or Ctrl-C. Note that the source data was just written, so it is read from the page cache.

    python bench/log_dir_move.py                 # 1 GiB
    python bench/log_dir_move.py --size-mb 100   # quicker
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from kafka import KafkaAdminClient  # noqa: E402
from kafka.structs import TopicPartitionReplica  # noqa: E402

from conformance.broker_process import start_broker  # noqa: E402

TOPIC = "bench-move"
RECORD = 10 * 1024


def partition_dirs(admin: KafkaAdminClient) -> dict[str, tuple[bool, int, int]]:
    """log dir -> (is future, size, offset lag) of the partition."""
    found = {}
    for broker in admin.describe_log_dirs():
        for log_dir in broker["log_dirs"]:
            for topic in log_dir["topics"]:
                if topic["name"] == TOPIC:
                    for p in topic["partitions"]:
                        found[log_dir["log_dir"]] = (p["is_future_key"], p["partition_size"], p["offset_lag"])
    return found


def fill(bootstrap: str, size: int, deadline: float) -> int:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 20,
                         "batch.size": 1 << 20, "queue.buffering.max.kbytes": 256 * 1024,
                         "message.max.bytes": 2 << 20})
    value = b"v" * RECORD
    sent = 0
    while sent < size:
        if time.monotonic() > deadline:
            raise TimeoutError(f"filling the partition took too long ({sent >> 20} MiB written)")
        try:
            producer.produce(TOPIC, value=value, partition=0)
            sent += RECORD
        except BufferError:
            producer.poll(0.05)
        producer.poll(0)
    remaining = producer.flush(max(1.0, deadline - time.monotonic()))
    if remaining:
        raise TimeoutError(f"{remaining} records not delivered")
    return sent


class LatencyProbe:
    """acks=all appends, one at a time, during the move: how long does an append wait?"""

    def __init__(self, bootstrap: str):
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                                  "max.in.flight": 1})
        self.latencies: list[float] = []
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            done = threading.Event()
            started = time.monotonic()

            def report(err, _msg):
                if err is not None:
                    self.errors += 1
                else:
                    self.latencies.append(time.monotonic() - started)
                done.set()

            self.producer.produce(TOPIC, value=b"p" * 1024, partition=0, on_delivery=report)
            while not done.is_set() and not self._stop.is_set():
                self.producer.poll(0.01)
            time.sleep(0.002)

    def start(self) -> LatencyProbe:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.producer.flush(10)

    def summary(self) -> str:
        if not self.latencies:
            return "no append completed"
        ordered = sorted(self.latencies)
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
        return (f"{len(ordered)} acks=all appends during the move: median {ordered[len(ordered) // 2] * 1000:.1f} ms, "
                f"p99 {p99 * 1000:.1f} ms, max {ordered[-1] * 1000:.1f} ms, errors {self.errors}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=int, default=1024, help="partition size to move (MiB)")
    parser.add_argument("--fill-timeout", type=float, default=600.0, help="seconds allowed to fill the partition")
    parser.add_argument("--move-timeout", type=float, default=600.0, help="seconds allowed for the move")
    parser.add_argument("--dir", default=None, help="parent of the temporary directory (default: the system's)")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="kafkapy-bench-log-dir-move-", dir=args.dir))
    broker = admin = probe = None
    try:
        dirs = [work / "disk1", work / "disk2"]
        broker = start_broker(overrides={"log.dirs": ",".join(map(str, dirs)), "broker.id": "0",
                                         "message.max.bytes": str(2 << 20)}, work_dir=work / "broker")
        creator = AdminClient({"bootstrap.servers": broker.bootstrap})
        creator.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
        started = time.monotonic()
        written = fill(broker.bootstrap, args.size_mb << 20, started + args.fill_timeout)
        print(f"filled {written / 2**20:.0f} MiB in {time.monotonic() - started:.1f} s")

        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=60000)
        (src, (_, size, _)), = partition_dirs(admin).items()
        dst = str(next(d for d in dirs if str(d) != src))
        probe = LatencyProbe(broker.bootstrap).start()
        time.sleep(1)
        started = time.monotonic()
        result = admin.alter_replica_log_dirs({TopicPartitionReplica(TOPIC, 0, 0): dst})
        if any(error.__name__ != "NoError" for error in result.values()):
            raise RuntimeError(f"AlterReplicaLogDirs failed: {result}")
        deadline = started + args.move_timeout
        seen_future = False
        while True:
            found = partition_dirs(admin)
            seen_future |= any(future for future, _, _ in found.values())
            if list(found) == [dst]:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"the move did not finish in {args.move_timeout:.0f} s: {found}")
            time.sleep(0.02)
        elapsed = time.monotonic() - started
        probe.stop()
        print(f"moved {size / 2**20:.0f} MiB from {Path(src).name} to {Path(dst).name} in {elapsed:.2f} s: "
              f"{size / 2**20 / elapsed:.0f} MiB/s (future replica seen: {seen_future}; the time includes "
              f"DescribeLogDirs polling every 20 ms)")
        print(probe.summary())
        for line in broker.log_path.read_text(errors="replace").splitlines():
            if "kafkapy.log.dir_move" in line:
                print("broker:", line)
        return 0
    finally:
        if probe is not None:
            probe.stop()
        if admin is not None:
            admin.close()
        if broker is not None:
            broker.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
