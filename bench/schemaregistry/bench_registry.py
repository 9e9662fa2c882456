"""Register and lookup latency and throughput of the built-in schema registry (docs/benchmarks.md).

Starts one `python -m kafkapy serve` with kafkapy.schema.registry.listener (or uses --url), then:
- register: distinct Avro schemas, one at a time (latency: each answered once its `_schemas` record
  is acknowledged with acks=all and applied) and with --concurrency clients (throughput);
- lookups served from memory: GET /schemas/ids/{id} (what a deserializer asks) and
  POST /subjects/{s} (what a serializer with auto.register.schemas=false asks).

    PYTHONPATH=. python bench/schemaregistry/bench_registry.py [--count 300] [--concurrency 8]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import aiohttp  # noqa: E402

CONTENT = {"Content-Type": "application/vnd.schemaregistry.v1+json"}


def schema(i: int) -> str:
    return json.dumps({"type": "record", "name": f"R{i}", "namespace": "bench",
                       "fields": [{"name": "id", "type": "long"}, {"name": f"f{i}", "type": "string"}]})


def quantiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    p = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000  # noqa: E731
    return f"p50 {p(0.5):.2f} ms, p99 {p(0.99):.2f} ms, mean {statistics.fmean(ordered) * 1000:.2f} ms"


async def timed(session, method, url, body=None):
    started = time.perf_counter()
    async with session.request(method, url, data=None if body is None else json.dumps(body), headers=CONTENT) as r:
        await r.read()
        if r.status != 200:
            raise RuntimeError(f"{method} {url}: {r.status}")
    return time.perf_counter() - started


async def run(url: str, count: int, concurrency: int) -> dict:
    results = {}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:
        # sequential registrations: latency
        latencies = [await timed(session, "POST", f"{url}/subjects/seq-{i}/versions", {"schema": schema(i)})
                     for i in range(count)]
        results["register latency"] = quantiles(latencies)
        # concurrent registrations: throughput
        queue = list(range(count, 2 * count))

        async def worker(kind: str, samples: list):
            while queue:
                i = queue.pop()
                if kind == "register":
                    samples.append(await timed(session, "POST", f"{url}/subjects/par-{i}/versions",
                                               {"schema": schema(i)}))
                elif kind == "id":
                    samples.append(await timed(session, "GET", f"{url}/schemas/ids/{1 + i % count}"))
                else:
                    samples.append(await timed(session, "POST", f"{url}/subjects/seq-{i % count}",
                                               {"schema": schema(i % count)}))

        for kind, label, n in (("register", "register", count), ("id", "GET /schemas/ids/{id}", count * 10),
                               ("lookup", "POST /subjects/{s} (lookup)", count * 10)):
            queue[:] = list(range(count, count + n)) if kind == "register" else list(range(n))
            if kind == "register":
                queue[:] = list(range(count, 2 * count))
            samples: list[float] = []
            started = time.perf_counter()
            await asyncio.gather(*(worker(kind, samples) for _ in range(concurrency)))
            elapsed = time.perf_counter() - started
            results[f"{label} x{concurrency}"] = f"{len(samples) / elapsed:,.0f}/s ({quantiles(samples)})"
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="an already running registry (default: start a broker)")
    parser.add_argument("--count", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    if args.url:
        results = asyncio.run(run(args.url.rstrip("/"), args.count, args.concurrency))
    else:
        from conformance.broker_process import free_port, start_broker

        port = free_port()
        with start_broker(overrides={"kafkapy.schema.registry.listener": f"http://127.0.0.1:{port}"}):
            results = asyncio.run(run(f"http://127.0.0.1:{port}", args.count, args.concurrency))
    for name, value in results.items():
        print(f"{name:40s} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
