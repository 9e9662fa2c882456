#!/usr/bin/env python3
"""Benchmark: how quickly a kafkapy test broker is ready, how small it is, and how soon a test gets
its first record back.

Measured, each --runs times (the report gives median, min, max and p90):
- in-process ready: `KafkaBroker()` (an event-loop thread in this process) from `start()` until the
  first ApiVersions is answered, after a first broker already started in this process (imports done);
- subprocess ready: `KafkaBroker(isolation="process")`, i.e. `python -m kafkapy serve --ephemeral
  --control`, from `start()` until the first ApiVersions is answered, with cached bytecode (compiled
  first; PYTHONDONTWRITEBYTECODE is cleared for the children);
- idle RSS of the subprocess broker, 1 s after it is ready (VmRSS from /proc);
- first record: on a running broker, create a topic, produce one record with a fresh confluent-kafka
  producer and read it back with a fresh consumer (assign(), no group) -- the time until it arrives;
- the same with storage="memory".

Everything is bounded; brokers and their temporary directories are removed even on failure.

    python bench/testing/startup.py              # 20 runs each
    python bench/testing/startup.py --runs 5
"""
from __future__ import annotations

import argparse
import asyncio
import compileall
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

import kafkapy  # noqa: E402
from kafkapy.net.client import BrokerConnection  # noqa: E402
from kafkapy.protocol.messages import ApiVersionsRequest  # noqa: E402
from kafkapy.testing import KafkaBroker  # noqa: E402


def api_versions_answered(port: int) -> None:
    """Send one ApiVersions (v3) and wait for its answer."""
    async def ask() -> None:
        connection = BrokerConnection("127.0.0.1", port, client_id="bench", request_timeout_s=10)
        try:
            await connection.send(ApiVersionsRequest(client_software_name="bench", client_software_version="1"), 3)
        finally:
            connection.close()

    asyncio.run(ask())


def time_ready(isolation: str, storage: str = "disk") -> tuple[float, int | None]:
    """Seconds from start() to the first ApiVersions answer; idle RSS in KiB for a process."""
    broker = KafkaBroker(isolation=isolation, storage=storage)
    begin = time.perf_counter()
    try:
        broker.start()
        api_versions_answered(broker.port)
        elapsed = time.perf_counter() - begin
        rss = None
        if isolation == "process":
            time.sleep(1.0)
            rss = rss_kib(broker._proc.pid)  # noqa: SLF001 -- the child's pid, only for this measurement
        return elapsed, rss
    finally:
        broker.stop()


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def time_first_record(broker: KafkaBroker) -> float:
    """Create a topic, produce one record with a fresh producer, read it with a fresh consumer."""
    import confluent_kafka

    topic = f"first-{uuid.uuid4().hex[:8]}"
    begin = time.perf_counter()
    broker.create_topic(topic)
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    producer.produce(topic, value=b"hello")
    if producer.flush(10) != 0:
        raise RuntimeError("the record was not acknowledged")
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "unused",
                                         "enable.auto.commit": False, "fetch.wait.max.ms": 10})
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            message = consumer.poll(0.05)
            if message is not None and message.error() is None:
                return time.perf_counter() - begin
        raise RuntimeError("the record did not come back within 10 s")
    finally:
        consumer.close()


def summary(name: str, values: list[float], unit: str = "ms", scale: float = 1000.0) -> str:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(round(0.9 * (len(ordered) - 1))))]
    return (f"{name:<34} median {statistics.median(values) * scale:8.1f} {unit}   min {ordered[0] * scale:8.1f}"
            f"   p90 {p90 * scale:8.1f}   max {ordered[-1] * scale:8.1f}   (n={len(values)})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()

    # "with cached bytecode": children may write and read __pycache__ (some environments, this one
    # included, set PYTHONDONTWRITEBYTECODE, and then every child would compile every module)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    compileall.compile_dir(str(Path(kafkapy.__file__).parent), quiet=1)
    begin = time.perf_counter()
    time_ready("thread")  # the first broker of the process pays for the imports
    first_thread = time.perf_counter() - begin
    time_ready("process")
    thread = [time_ready("thread")[0] for _ in range(args.runs)]
    thread_memory = [time_ready("thread", "memory")[0] for _ in range(args.runs)]
    process_runs = [time_ready("process") for _ in range(args.runs)]
    first_record: list[float] = []
    first_record_memory: list[float] = []
    for storage, results in (("disk", first_record), ("memory", first_record_memory)):
        with KafkaBroker(storage=storage) as broker:
            time_first_record(broker)  # the first client of the process loads librdkafka
            results += [time_first_record(broker) for _ in range(args.runs)]

    print(f"{'in-process ready, first in process':<34} {first_thread * 1000:8.1f} ms (imports included)")
    print(summary("in-process ready", thread))
    print(summary("in-process ready (memory storage)", thread_memory))
    print(summary("subprocess ready", [p[0] for p in process_runs]))
    print(summary("subprocess idle RSS", [p[1] / 1024 for p in process_runs], unit="MiB", scale=1.0))
    print(summary("topic + first record back", first_record))
    print(summary("same, memory storage", first_record_memory))
    return 0


if __name__ == "__main__":
    sys.exit(main())
