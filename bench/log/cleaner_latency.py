"""Produce latency with the log cleaner busy on a large compacted log, against the cleaner idle.

Run: python bench/log/cleaner_latency.py [--size-mb 1024] [--seconds 30] [--rate 200]
                                         [--worker process|thread] [--dir DIR]

1. A kafkapy broker (a real `python -m kafkapy serve` process) gets a topic "big" with
   cleanup.policy=delete and no retention, and a topic "lat".
2. The broker is stopped and big-0 is filled directly with --size-mb of keyed records
   (1,000-record batches of 100-byte values, 256 different batches over 1M possible keys,
   about 230k distinct keys), so the cleaner has most of the log to remove; the broker is started again (clean shutdown: no recovery).
3. Phase "idle": a confluent-kafka producer sends --rate small records per second to "lat"
   (acks=1, linger.ms=0) for --seconds, timing each from produce() to its delivery report.
4. big's cleanup.policy becomes compact (IncrementalAlterConfigs); once the cleaner has
   picked it up (log.cleaner.backoff.ms=500), phase "busy" repeats step 3. The cleaner must
   still be cleaning when the phase ends (checked in the broker's log), else the run says so.
5. Prints p50/p99/max of both phases and busy p99 / idle p99 (goal: <= 1.2), then waits for
   the cleaning to finish and prints its duration and throughput.

--worker chooses where the cleaner filters records (KAFKAPY_CLEANER_WORKER): "process" (the
default: a worker process) or "thread" (the broker's cleaner thread, time-sliced).
"""
from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from conformance.broker_process import start_broker  # noqa: E402
from kafkapy.log import LogConfig, PartitionLog  # noqa: E402
from kafkapy.protocol.records import build_batch  # noqa: E402

KEYS = 1_000_000
RECORDS_PER_BATCH = 1000
VALUE_BYTES = 100
SEGMENT_BYTES = 64 * 1024 * 1024


def fill_big(directory: Path, size_mb: int) -> tuple[int, int]:
    """Append size_mb of keyed batches to the partition dir; returns (records, bytes)."""
    rng = random.Random(15)
    templates = []
    ts = int(time.time() * 1000)
    for _ in range(256):
        records = [(b"key%07d" % rng.randrange(KEYS), rng.randbytes(VALUE_BYTES), (), ts)
                   for _ in range(RECORDS_PER_BATCH)]
        templates.append(build_batch(records, base_timestamp=ts))
    plog = PartitionLog.open(directory, LogConfig(segment_bytes=SEGMENT_BYTES, cleanup_policy="delete",
                                                  retention_ms=-1), clean_shutdown=True)
    target = size_mb * 1024 * 1024
    written = records = 0
    i = 0
    while written < target:
        batch = templates[i % len(templates)]
        i += 1
        plog.append(bytearray(batch))
        written += len(batch)
        records += RECORDS_PER_BATCH
    plog.close()
    return records, written


def measure(bootstrap: str, seconds: float, rate: int) -> list[float]:
    """Latencies (ms) of `rate` records/s sent for `seconds`."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 0,
                         "enable.idempotence": False})
    latencies: list[float] = []
    # Warm up the connection and metadata.
    producer.produce("lat", b"warm-up")
    producer.flush(10)
    interval = 1.0 / rate
    start = time.perf_counter()
    sent = 0
    while True:
        now = time.perf_counter()
        if now - start >= seconds:
            break
        due = start + sent * interval
        if now < due:
            producer.poll(due - now)
            continue
        t0 = time.perf_counter()
        producer.produce("lat", b"x" * 100, key=b"k%d" % (sent % 100),
                         on_delivery=lambda err, msg, t0=t0: latencies.append((time.perf_counter() - t0) * 1000))
        sent += 1
        producer.poll(0)
    producer.flush(30)
    return latencies


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def summary(name: str, values: list[float]) -> str:
    return (f"{name:5s}: {len(values)} records, p50 {statistics.median(values):.2f} ms, "
            f"p99 {pct(values, 99):.2f} ms, max {max(values):.2f} ms")


def cleaned_lines(broker) -> list[str]:
    text = broker.log_path.read_text(errors="replace")
    return [line for line in text.splitlines() if "cleaned big-0" in line]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--rate", type=int, default=200)
    parser.add_argument("--worker", choices=("process", "thread"), default="process")
    parser.add_argument("--dir", type=Path, default=None, help="work dir (default: a temporary dir)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kafkapy-cleaner-bench-", dir=args.dir))
    env = dict(os.environ, KAFKAPY_CLEANER_WORKER=args.worker)
    broker = start_broker(overrides={"log.cleaner.backoff.ms": 500, "num.partitions": 1}, work_dir=work, env=env)
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        futures = admin.create_topics([
            NewTopic("big", 1, 1, config={"cleanup.policy": "delete", "retention.ms": "-1",
                                          "segment.bytes": str(SEGMENT_BYTES)}),
            NewTopic("lat", 1, 1)])
        for future in futures.values():
            future.result(30)
        broker.stop()
        started = time.monotonic()
        records, written = fill_big(broker.data_dir / "big-0", args.size_mb)
        print(f"filled big-0: {records:,} records, {written / 2**20:.0f} MiB in {time.monotonic() - started:.1f} s")
        broker.start(timeout=120)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})

        idle = measure(broker.bootstrap, args.seconds, args.rate)
        print(summary("idle", idle), flush=True)

        resource = ConfigResource("TOPIC", "big", incremental_configs=[
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET)])
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(30)
        clean_started = time.monotonic()
        time.sleep(1.5)  # a backoff tick: the cleaner is at work on big-0
        busy = measure(broker.bootstrap, args.seconds, args.rate)
        busy_end = time.monotonic()
        print(summary("busy", busy), flush=True)
        still_cleaning = not cleaned_lines(broker)
        ratio = pct(busy, 99) / pct(idle, 99)
        print(f"busy p99 / idle p99 = {ratio:.2f} (goal <= 1.20: {'met' if ratio <= 1.2 else 'NOT met'}); "
              f"cleaner {'still busy at the end of the busy phase' if still_cleaning else 'FINISHED before the busy phase ended'}"
              f" (worker: {args.worker})", flush=True)
        deadline = time.monotonic() + 3600
        while not cleaned_lines(broker) and time.monotonic() < deadline:
            time.sleep(1)
        lines = cleaned_lines(broker)
        if lines:
            duration = time.monotonic() - clean_started
            match = re.search(r"(\d+) -> (\d+) bytes", lines[0])
            print(f"cleaning finished after ~{duration:.0f} s ({written / 2**20 / duration:.1f} MiB/s): {lines[0].split(' - ')[-1]}"
                  if match else lines[0])
            if busy_end - clean_started > duration:
                print("note: the cleaning ended inside the busy phase")
    finally:
        broker.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
