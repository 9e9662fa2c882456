#!/usr/bin/env python3
"""Cost of the Prometheus metrics: produce/consume throughput with `kafkapy.metrics.listener` on
against off, in the same run.

Two kafkapy brokers run side by side (both `python -m kafkapy serve`, fresh disk log dirs, 127.0.0.1
only): one without the listener (only the always-on counters of broker.metrics), one with it and a
scraper fetching /metrics every --scrape-interval seconds during the phases (default 15 s, a common
Prometheus setting; its own default is 60 s). The phases are bench/broker's (confluent-kafka producer
and consumer, linger.ms=5, no compression): each case is run --repeat times, the two brokers
alternating (off, on, on, off, ...) so that drift on the shared machine hits both alike. Reported per
case: median records/s of each and their ratio, and the broker's CPU seconds per million records
summed over the repetitions, and their ratio (the steadier measure on a shared machine: throughput
moves with whatever else runs, CPU per record much less).

    python bench/broker/metrics_overhead.py                 # 3 cases x 4 repetitions
    python bench/broker/metrics_overhead.py --quick         # 1 case x 2 repetitions (smoke test)
    python bench/broker/metrics_overhead.py --dispatch      # the request path in-process only

--dispatch measures what the metrics add to the request path itself, away from clients and machine
noise: one in-process broker runs the same Produce (one 8-partition request of 100-record batches)
and Fetch (8 partitions, 64 KiB each, from the log) frames through dispatch.handle_frame as a
connection does (response_sent included), in alternating blocks with (a) no metrics at all (a no-op
stand-in), (b) the always-on counters, (c) the exporter's detailed metrics; the median microseconds
per request (CPU time of the process, so that other work on a shared machine counts less) of each
and the ratios are printed.
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench_broker import create_topic, delete_topic, run_consume, run_produce  # noqa: E402
from broker_processes import process_tree_cpu_s  # noqa: E402
from broker_report import Case, PhaseResult  # noqa: E402

from conformance.broker_process import free_port, start_broker  # noqa: E402


class Scraper(threading.Thread):
    """GETs /metrics every `interval` seconds until stopped; counts scrapes and their time."""

    def __init__(self, url: str, interval: float):
        super().__init__(daemon=True)
        self.url, self.interval = url, interval
        self.stop_event = threading.Event()
        self.scrapes, self.seconds, self.bytes = 0, 0.0, 0

    def run(self) -> None:
        if self.interval <= 0:
            return
        while not self.stop_event.wait(self.interval):
            started = time.perf_counter()
            try:
                with urllib.request.urlopen(self.url, timeout=10) as response:
                    self.bytes = len(response.read())
                self.scrapes += 1
                self.seconds += time.perf_counter() - started
            except OSError as exc:
                print(f"  scrape failed: {exc}", file=sys.stderr)


def phase(broker, fn) -> PhaseResult:
    cpu = process_tree_cpu_s(broker.pid)
    result = fn()
    result.broker_cpu_s = process_tree_cpu_s(broker.pid) - cpu
    return result


def run_case(broker, case: Case, records: int, seconds: float) -> tuple[PhaseResult, PhaseResult]:
    topic = f"overhead-{case.partitions}p-{case.record_bytes}b-{time.monotonic_ns() % 10**8}"
    create_topic(broker.bootstrap, topic, case.partitions)
    try:
        produced = phase(broker, lambda: run_produce(broker.bootstrap, topic, case, records, seconds))
        consumed = phase(broker, lambda: run_consume(broker.bootstrap, topic, case, produced.records, seconds))
    finally:
        delete_topic(broker.bootstrap, topic)
    return produced, consumed


class _NoMetrics:
    """A stand-in for broker.metrics that does nothing (the request path without metrics)."""

    detailed = False

    def produced(self, *args) -> None:
        pass

    def produce_failed(self, *args) -> None:
        pass

    def on_response(self, *args):
        return None


def _request_frame(request, version: int) -> bytes:
    import struct

    from kafkapy.protocol.headers import request_header_version

    client = b"bench-client"
    header = struct.pack(">hhih", request.API_KEY, version, 7, len(client)) + client
    if request_header_version(request.API_KEY, version) >= 2:
        header += b"\x00"  # no tagged fields
    return header + b"".join(bytes(p) for p in request.encode_parts(version))


def dispatch_overhead(blocks: int, per_block: int, record_bytes: int = 100) -> None:
    import asyncio
    import tempfile

    from kafkapy.node import build_broker
    from kafkapy.broker.config import BrokerConfig
    from kafkapy.broker.dispatch import RequestContext, handle_frame
    from kafkapy.metrics import BrokerMetrics
    from kafkapy.protocol.messages import FetchRequest, ProduceRequest
    from kafkapy.protocol.records import build_batch

    data_dir = tempfile.mkdtemp(prefix="kafkapy-metrics-bench-")
    broker = build_broker(BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": data_dir, "broker.id": "0"}))
    broker.logs.load()
    broker.partitions.sync_with_metadata()
    broker.partitions.create_topic("bench", 8, 1)
    batch = build_batch([(b"key", b"v" * record_bytes)] * 100)
    produce = _request_frame(ProduceRequest(acks=1, timeout_ms=1000, topic_data=[ProduceRequest.TopicProduceData(
        name="bench", partition_data=[ProduceRequest.PartitionProduceData(index=p, records=batch)
                                      for p in range(8)])]), 9)
    for _ in range(40):  # something to fetch
        asyncio.run(handle_frame(RequestContext(broker, None), produce))
    fetch = _request_frame(FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=8 << 20,
                                        session_epoch=-1, topics=[FetchRequest.FetchTopic(
                                            topic="bench", partitions=[FetchRequest.FetchPartition(
                                                partition=p, fetch_offset=0, partition_max_bytes=64 << 10)
                                                for p in range(8)])]), 12)
    modes = {"none": _NoMetrics(), "counters": BrokerMetrics(), "detailed": BrokerMetrics()}
    modes["detailed"].detailed = True

    async def block(frame: bytes, metrics) -> float:
        broker.metrics = metrics
        # CPU time of this process, not wall time: other work on the machine preempts us, and
        # both are what the metrics would cost a broker
        started = time.process_time()
        for _ in range(per_block):
            ctx = RequestContext(broker, None)
            await handle_frame(ctx, frame)
            if ctx.timing is not None:
                metrics.response_sent(ctx.timing)
        return (time.process_time() - started) / per_block * 1e6

    async def run() -> dict:
        results = {(api, mode): [] for api in ("Produce", "Fetch") for mode in modes}
        for i in range(blocks):
            order = list(modes) if i % 2 == 0 else list(reversed(modes))
            for api, frame in (("Produce", produce), ("Fetch", fetch)):
                for mode in order:
                    results[(api, mode)].append(await block(frame, modes[mode]))
        return results

    try:
        results = asyncio.run(run())
    finally:  # the produce blocks write (blocks x 3 x per-block) requests of 800 records: remove them
        broker.logs.close()
        broker.metadata.close()
        shutil.rmtree(data_dir, ignore_errors=True)
    print(f"Request path in-process: {blocks} alternating blocks of {per_block} requests, 100 records of "
          f"{record_bytes} B per partition, median CPU us per request\n")
    print("| request | no metrics | counters (always on) | detailed (listener set) | counters/none | detailed/none |")
    print("|---|---|---|---|---|---|")
    for api in ("Produce", "Fetch"):
        none, counters, detailed = (statistics.median(results[(api, m)]) for m in modes)
        print(f"| {api} (8 partitions) | {none:.1f} | {counters:.1f} | {detailed:.1f} | {counters / none:.3f} | "
              f"{detailed / none:.3f} |")


def hook_costs(n: int = 50_000) -> None:
    """CPU microseconds per call of each metrics hook on the request path (8-partition requests)."""
    import asyncio
    from types import SimpleNamespace

    from kafkapy.metrics import BrokerMetrics
    from kafkapy.protocol.headers import RequestHeader
    from kafkapy.protocol.messages import FetchRequest, FetchResponse, ProduceRequest, ProduceResponse
    from kafkapy.security.quota_tracker import BusyTime

    ctx = SimpleNamespace(header=RequestHeader(1, 12, 1, "bench"), client_host="127.0.0.1")
    fetch = FetchRequest(replica_id=-1, session_epoch=3, topics=[FetchRequest.FetchTopic(topic="t", partitions=[
        FetchRequest.FetchPartition(partition=p, fetch_offset=100) for p in range(8)])])
    fetched = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(topic="t", partitions=[
        FetchResponse.PartitionData(partition_index=p, records=b"x" * 1000) for p in range(8)])])
    produced = ProduceResponse(responses=[ProduceResponse.TopicProduceResponse(name="t", partition_responses=[
        ProduceResponse.PartitionProduceResponse(index=p) for p in range(8)])])

    def per_call(fn) -> float:
        started = time.process_time()
        for _ in range(n):
            fn()
        return (time.process_time() - started) / n * 1e6

    print(f"\nHooks, CPU us per call ({n} calls each):\n")
    print("| hook | counters (always on) | detailed (listener set) |")
    print("|---|---|---|")
    rows = {}
    for detailed in (False, True):
        m = BrokerMetrics()
        m.detailed = detailed
        rows.setdefault("Produce response: on_response + response_sent", []).append(per_call(
            lambda: m.response_sent(m.on_response(ctx, 0, 9, ProduceRequest(), produced, 0.0, None))))
        rows.setdefault("Fetch response (8 x 1000 B): on_response + response_sent", []).append(per_call(
            lambda: m.response_sent(m.on_response(ctx, 1, 12, fetch, fetched, 0.0, None))))
        rows.setdefault("produced() per partition appended", []).append(per_call(lambda: m.produced("t", 100, 10_000)))

    async def awaits() -> float:
        async def handler():
            return None

        started = time.process_time()
        for _ in range(n):
            await BusyTime(handler())
        busy = time.process_time() - started
        started = time.process_time()
        for _ in range(n):
            await handler()
        return (busy - (time.process_time() - started)) / n * 1e6

    rows["BusyTime around the handler (local/remote split)"] = [0.0, asyncio.run(awaits())]
    for name, (counters, detailed) in rows.items():
        print(f"| {name} | {counters:.2f} | {detailed:.2f} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="max records per phase")
    parser.add_argument("--seconds", type=float, default=10.0, help="max seconds per phase")
    parser.add_argument("--repeat", type=int, default=4, help="repetitions per case and broker")
    parser.add_argument("--scrape-interval", type=float, default=15.0,
                        help="seconds between scrapes during the phases (0: none, the request path only)")
    parser.add_argument("--quick", action="store_true", help="one case, 2 repetitions, 50k records, 3 s")
    parser.add_argument("--dispatch", action="store_true", help="only the in-process request-path measurement")
    parser.add_argument("--blocks", type=int, default=20, help="--dispatch: alternating blocks per mode")
    parser.add_argument("--per-block", type=int, default=200, help="--dispatch: requests per block")
    parser.add_argument("--record-bytes", type=int, default=100, help="--dispatch: record value size")
    args = parser.parse_args(argv)
    if args.dispatch:
        dispatch_overhead(args.blocks, args.per_block, args.record_bytes)
        hook_costs()
        return 0
    cases = [Case(1, 100, "1"), Case(8, 100, "1"), Case(8, 1024, "1")]
    if args.quick:
        cases, args.repeat, args.records, args.seconds = cases[:1], 2, 50_000, 3.0
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    with start_broker() as off, start_broker(overrides={"kafkapy.metrics.listener": url.rsplit("/", 1)[0]}) as on:
        scraper = Scraper(url, args.scrape_interval)
        scraper.start()
        rows = []
        try:
            for case in cases:
                results = {"off": [], "on": []}
                for rep in range(args.repeat):
                    order = ("off", "on") if rep % 2 == 0 else ("on", "off")
                    for mode in order:
                        broker = off if mode == "off" else on
                        results[mode].append(run_case(broker, case, args.records, args.seconds))
                rows.append((case, results))
                print(f"{case.label}: done", file=sys.stderr)
        finally:
            scraper.stop_event.set()
        # what one scrape costs the broker (CPU of its process over back-to-back scrapes, idle baseline
        # of the same length subtracted); the data of the run is still there
        scraper.join(timeout=30)
        idle_cpu = process_tree_cpu_s(on.pid)
        time.sleep(3.0)
        idle_cpu = process_tree_cpu_s(on.pid) - idle_cpu
        cpu, started, n = process_tree_cpu_s(on.pid), time.perf_counter(), 20
        for _ in range(n):
            with urllib.request.urlopen(url, timeout=10) as response:
                body = response.read()
        wall = time.perf_counter() - started
        scrape_cpu = (process_tree_cpu_s(on.pid) - cpu - idle_cpu * wall / 3.0) / n
    print(f"Metrics overhead: {args.repeat} repetitions per case and broker, alternating; scrape every "
          f"{args.scrape_interval:g} s ({scraper.scrapes} scrapes, mean {1000 * scraper.seconds / max(scraper.scrapes, 1):.1f} ms, "
          f"{scraper.bytes} bytes)\n")
    print(f"One scrape ({len(body)} bytes) costs the broker {1000 * scrape_cpu:.0f} ms of CPU "
          f"({1000 * wall / n:.0f} ms wall): {100 * scrape_cpu / 15:.2f}% of a core at a 15 s interval, "
          f"{100 * scrape_cpu / 30:.2f}% at 30 s.\n")
    print("| case | phase | off rec/s | on rec/s | on/off | broker CPU s per 1M rec, off | on | on/off |")
    print("|---|---|---|---|---|---|---|---|")
    for case, results in rows:
        for index, name in ((0, "produce"), (1, "consume")):
            def rate(mode):
                rates = [r[index].records_per_s for r in results[mode] if not r[index].error]
                return statistics.median(rates) if rates else float("nan")

            def cpu(mode):
                # summed over the repetitions: /proc counts CPU in 10 ms ticks
                ok = [r[index] for r in results[mode] if not r[index].error and r[index].records]
                return 1e6 * sum(r.broker_cpu_s for r in ok) / sum(r.records for r in ok) if ok else float("nan")

            errors = [r[index].error for mode in results for r in results[mode] if r[index].error]
            note = f" ({len(errors)} failed: {errors[0]})" if errors else ""
            print(f"| {case.label} | {name} | {rate('off'):,.0f} | {rate('on'):,.0f} | "
                  f"{rate('on') / rate('off'):.3f} | {cpu('off'):.3f} | {cpu('on'):.3f} | {cpu('on') / cpu('off'):.3f} |{note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
