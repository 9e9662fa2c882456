"""Produce latency with the log cleaner busy on a large compacted log, against the cleaner idle.

Run: python bench/log/cleaner_latency.py [--size-mb 1024] [--seconds 30] [--rate 200]
         [--pairs 10] [--max-wait 600] [--window-seconds 5] [--worker process|thread] [--dir DIR]

1. A kafkapy broker (a real `python -m kafkapy serve` process) gets a topic "big" with
   cleanup.policy=delete and no retention, and a topic "lat".
2. The broker is stopped and big-0 is filled directly with --size-mb of keyed records
   (1,000-record batches of 100-byte values, 256 different batches over 1M possible keys,
   about 230k distinct keys), so the cleaner has most of the log to remove; the broker is started again (clean shutdown: no recovery).
3. Phase "before": a confluent-kafka producer sends --rate small records per second to "lat"
   (acks=1, linger.ms=0) for --seconds, timing each from produce() to its delivery report.
4. big's cleanup.policy becomes compact (IncrementalAlterConfigs); the cleaner picks it up
   (log.cleaner.backoff.ms=500). Then, in the same run, --pairs pairs of --window-second
   windows alternate "idle" (the cleaner's worker process stopped with SIGSTOP) and "busy"
   (SIGCONT: cleaning), so that both see the same machine load, which drifts on a shared
   machine. The cleaner must still be cleaning at the end (checked in the broker's log).
5. Prints p50/p99/max of each phase and busy p99 / idle p99 (goal: <= 1.2), then waits for
   the cleaning to finish and prints its duration and throughput.

With --worker thread there is no worker process to stop: the phases are then "before" and
one --seconds "busy" phase, as the first version of this script did.

--worker chooses where the cleaner filters records (KAFKAPY_CLEANER_WORKER): "process" (the
default: a worker process) or "thread" (the broker's cleaner thread, time-sliced).
"""
from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import signal
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
    return (f"{name:6s}: {len(values)} records, p50 {statistics.median(values):.2f} ms, "
            f"p99 {pct(values, 99):.2f} ms, max {max(values):.2f} ms")


def worker_pid(broker_pid: int) -> int | None:
    """The cleaner's worker process: a child of the broker started by multiprocessing."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == broker_pid and b"multiprocessing" in cmdline and b"resource_tracker" not in cmdline:
            return int(name)
    return None


def cleaned_lines(broker) -> list[str]:
    text = broker.log_path.read_text(errors="replace")
    return [line for line in text.splitlines() if "cleaned big-0" in line]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--rate", type=int, default=200)
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--max-wait", type=float, default=600.0, help="seconds to wait for the cleaning to end")
    parser.add_argument("--window-seconds", type=float, default=5.0)
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

        before = measure(broker.bootstrap, args.seconds, args.rate)
        print(summary("before", before), flush=True)

        resource = ConfigResource("TOPIC", "big", incremental_configs=[
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET)])
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(30)
        clean_started = time.monotonic()
        idle: list[float] = []
        busy: list[float] = []
        worker = None
        deadline = time.monotonic() + 30
        while args.worker == "process" and worker is None and time.monotonic() < deadline:
            time.sleep(0.2)
            worker = worker_pid(broker.pid)
        if worker is None:
            time.sleep(1.5)
            busy = measure(broker.bootstrap, args.seconds, args.rate)
            idle = before
        else:
            time.sleep(1.0)
            pair_ratios = []
            try:
                for _ in range(args.pairs):
                    os.kill(worker, signal.SIGSTOP)
                    time.sleep(0.2)
                    idle_window = measure(broker.bootstrap, args.window_seconds, args.rate)
                    os.kill(worker, signal.SIGCONT)
                    time.sleep(0.2)
                    busy_window = measure(broker.bootstrap, args.window_seconds, args.rate)
                    idle += idle_window
                    busy += busy_window
                    pair_ratios.append(pct(busy_window, 99) / pct(idle_window, 99))
                    print(f"  pair {len(pair_ratios)}: p99 idle {pct(idle_window, 99):.2f} ms, "
                          f"busy {pct(busy_window, 99):.2f} ms", flush=True)
            finally:
                os.kill(worker, signal.SIGCONT)
            print(f"median of the per-pair p99 ratios: {statistics.median(pair_ratios):.2f}")
        print(summary("idle", idle), flush=True)
        print(summary("busy", busy), flush=True)
        busy_end = time.monotonic()
        still_cleaning = not cleaned_lines(broker)
        ratio = pct(busy, 99) / pct(idle, 99)
        print(f"busy p99 / idle p99 = {ratio:.2f} (goal <= 1.20: {'met' if ratio <= 1.2 else 'NOT met'}); "
              f"cleaner {'still busy at the end of the busy phase' if still_cleaning else 'FINISHED before the busy phase ended'}"
              f" (worker: {args.worker})", flush=True)
        deadline = time.monotonic() + args.max_wait
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
        else:
            print(f"cleaning not finished {time.monotonic() - clean_started:.0f} s after it started")
    finally:
        broker.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
