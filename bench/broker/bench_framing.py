#!/usr/bin/env python3
"""Cost of cutting the request byte stream into frames (KafkaConnection.data_received), the part
of the connection on every request's path, for this checkout or another one (--repo), so that a
change to the framing can be compared with the code before it on the same machine in one run.

The connection is fed reads of `--read` bytes (uvloop reads at most 256 KiB) holding frames of
each size; processing is left out (the queued frames are dropped after each read, releasing the
memory pool as the worker would). CPU-bound and in-process: the best of --repeat runs is reported,
which is far less sensitive to a loaded machine than an end-to-end throughput run.

    python bench/broker/bench_framing.py                       # this checkout
    python bench/broker/bench_framing.py --repo /tmp/kafkapy-before
    python bench/broker/bench_framing.py --compare /tmp/kafkapy-before   # both, interleaved, ratios
"""
from __future__ import annotations

import argparse
import json
import struct
import subprocess
import sys
import time
from pathlib import Path

SIZES = (100, 1024, 16 * 1024, 1024 * 1024)


def _measure(repo: str, read: int, total: int, repeat: int) -> dict[int, float]:
    sys.path.insert(0, repo)
    from kafkapy.broker.connection import KafkaConnection

    class Config:
        def get(self, name):
            return {"socket.request.max.bytes": 104857600}.get(name)

    class Broker:
        config = Config()
        connections: set = set()

    class NoQuotas:
        def on_connect(self, conn, listener_name, ip): pass
        def on_close(self, conn): pass

    try:  # a connection is made with its broker's ConnectionServices (older refs: with the broker)
        from kafkapy.broker.connection import ConnectionServices
        from kafkapy.broker.memory_pool import MemoryPool

        shared = ConnectionServices(Broker(), Broker.connections, MemoryPool(2**62), NoQuotas())
    except ImportError:
        shared = None

    class Transport:
        def pause_reading(self): pass
        def resume_reading(self): pass
        def close(self): pass

    results = {}
    for size in SIZES:
        frame = struct.pack(">i", size) + bytes(size)
        count = max(1, total // len(frame))
        stream = frame * count
        reads = [stream[i:i + read] for i in range(0, len(stream), read)]
        best = float("inf")
        for _ in range(repeat):
            conn = KafkaConnection(Broker() if shared is None else shared)
            conn.transport = Transport()
            conn._worker = object()  # no processing: frames are dropped below
            frames = conn._frames
            pool = getattr(conn, "_pool", None)
            started = time.perf_counter()
            for data in reads:
                conn.data_received(data)
                frames.clear()
                conn._queued_bytes = 0
                if pool is not None:
                    pool.release(conn._held)
                    conn._held = 0
            best = min(best, time.perf_counter() - started)
        results[size] = len(stream) / best / 1e6  # MB/s
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", default=str(Path(__file__).resolve().parents[2]))
    parser.add_argument("--compare", help="another checkout: run both (interleaved) and print ratios")
    parser.add_argument("--read", type=int, default=256 * 1024, help="bytes per read (data_received)")
    parser.add_argument("--total", type=int, default=64 * 1024 * 1024, help="bytes fed per size and run")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3, help="with --compare: alternations of the two")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not args.compare:
        results = _measure(args.repo, args.read, args.total, args.repeat)
        if args.json:
            print(json.dumps(results))
        else:
            for size, rate in results.items():
                print(f"frames of {size:>8} B: {rate:8.0f} MB/s")
        return
    best: dict[str, dict[int, float]] = {"this": {}, "other": {}}
    for _ in range(args.rounds):
        for label, repo in (("other", args.compare), ("this", args.repo)):
            out = subprocess.run([sys.executable, __file__, "--repo", repo, "--read", str(args.read), "--total",
                                  str(args.total), "--repeat", str(args.repeat), "--json"],
                                 check=True, capture_output=True, text=True).stdout
            for size, rate in json.loads(out).items():
                best[label][int(size)] = max(best[label].get(int(size), 0.0), rate)
    print(f"| frame size | {args.compare} MB/s | {args.repo} MB/s | ratio |")
    print("|---|---|---|---|")
    for size in SIZES:
        other, this = best["other"][size], best["this"][size]
        print(f"| {size} B | {other:.0f} | {this:.0f} | {this / other:.2f} |")


if __name__ == "__main__":
    main()
