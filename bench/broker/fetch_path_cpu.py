#!/usr/bin/env python3
"""CPU of the broker's Python fetch path per Fetch request, two git refs side by side, in-process.

    python bench/broker/fetch_path_cpu.py BEFORE AFTER [--rounds 40] [--fetches 500]

What consume_cpu.py cannot separate: a consumer fetch costs the broker mostly kernel time (sending
the segment bytes), and the Python work of the request path is a small part of it, below the
resolution of /proc's user time. Here one Fetch request is handled again and again without sockets,
as the connection hands it over: `dispatch.handle_frame` (header, decode, handler, response header,
`encode_parts`; the records stay file slices, never read), on a broker built in-process
(tests/broker/inprocess.py of each tree) whose topic has 8 partitions, each holding 40 batches of
250 records of 100 bytes, written through the Produce handler. The request is what librdkafka sends
(sessionless: session id 0, epoch -1; read_uncommitted; 1 MiB per partition, 50 MiB in all; Fetch
v16 or the highest the ref advertises), from offset 0, so every fetch cuts 1 MiB of each partition.

One child process per side (cwd and PYTHONPATH = its detached worktree, checked; a ref naming a
directory is used as it is) builds the broker once, then times loops of --fetches fetches on
demand (time.process_time); the parent alternates the sides loop by loop (ABBA), so both see the
same moment of the machine, and reports the medians, the median of the paired ratios before/after
(>= 1: after spends no more CPU per fetch) and their middle half, and the fastest loop of each side
(the one least disturbed by whatever else the machine did). Only one child runs at a time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
PARTITIONS = 8
BATCHES = 40
RECORDS_PER_BATCH = 250
RECORD_BYTES = 100


# -- child: runs inside one tree --------------------------------------------------------------------------


def child(version_cap: int) -> dict:
    import asyncio
    import struct

    sys.path.insert(0, os.getcwd())
    from kafkapy.broker.dispatch import HANDLERS, RequestContext, handle_frame
    from kafkapy.protocol.headers import RequestHeader
    from kafkapy.protocol.messages import FetchRequest, ProduceRequest
    from kafkapy.protocol.records import build_batch
    from tests.broker.inprocess import InProcessBroker

    def header(api_key: int, version: int, correlation: int) -> bytes:
        client = b"bench"
        head = struct.pack(">hhih", api_key, version, correlation, len(client)) + client
        flexible = (api_key == 1 and version >= 12) or (api_key == 0 and version >= 9)
        return head + (b"\x00" if flexible else b"")  # no tagged fields

    work = Path(tempfile.mkdtemp(prefix="fetch-path-cpu-"))
    broker = InProcessBroker(work / "data")
    try:
        broker.create_topic("t", PARTITIONS)
        inner = broker.broker
        produce_version = min(inner.advertised_versions[ProduceRequest.API_KEY][1], 9)
        value = os.urandom(RECORD_BYTES)
        batch = build_batch([(None, value)] * RECORDS_PER_BATCH)
        request = ProduceRequest(acks=1, timeout_ms=10_000, topic_data=[ProduceRequest.TopicProduceData(
            name="t", partition_data=[ProduceRequest.PartitionProduceData(index=p, records=batch)
                                      for p in range(PARTITIONS)])])

        async def fill() -> None:
            for _ in range(BATCHES):
                decoded = ProduceRequest.decode(request.encode(produce_version), produce_version)
                ctx = RequestContext(inner, None, RequestHeader(0, produce_version, 1, "bench"))
                await HANDLERS[0](ctx, decoded)

        asyncio.run(fill())
        version = min(inner.advertised_versions[FetchRequest.API_KEY][1], version_cap)
        topic_id = inner.partitions.topic("t").topic_id
        fetch = FetchRequest(replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=52_428_800, isolation_level=0,
                             session_id=0, session_epoch=-1, topics=[FetchRequest.FetchTopic(
                                 topic="t", topic_id=topic_id, partitions=[
                                     FetchRequest.FetchPartition(partition=p, fetch_offset=0,
                                                                 partition_max_bytes=1_048_576)
                                     for p in range(PARTITIONS)])])
        frame = header(1, version, 7) + fetch.encode(version)

        async def loop(count: int) -> tuple[float, int]:
            sent = 0
            started = time.process_time()
            for _ in range(count):
                ctx = RequestContext(inner, None)
                parts = await handle_frame(ctx, frame)
                sent = sum(len(p) for p in parts)
            return time.process_time() - started, sent

        async def serve() -> None:
            """Answer each line N on stdin with the CPU microseconds per fetch of N fetches."""
            await loop(200)  # warm: first-use imports, caches
            print(json.dumps({"ready": True, "version": version, "kafkapy": __import__("kafkapy").__file__}),
                  flush=True)
            for line in sys.stdin:
                seconds, size = await loop(int(line))
                print(json.dumps({"us_per_fetch": 1e6 * seconds / int(line), "response_bytes": size}), flush=True)

        asyncio.run(serve())
        return {}
    finally:
        broker.close()
        shutil.rmtree(work, ignore_errors=True)


# -- parent ----------------------------------------------------------------------------------------------


def git(*args: str, cwd: Path = REPO_ROOT) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", nargs="?")
    parser.add_argument("after", nargs="?")
    parser.add_argument("--rounds", type=int, default=40, help="timed loops per side, alternating (default 40)")
    parser.add_argument("--fetches", type=int, default=500, help="fetches per timed loop (default 500)")
    parser.add_argument("--version-cap", type=int, default=16, help="highest Fetch version to use")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.version_cap)
        return 0
    if not (args.before and args.after):
        parser.error("BEFORE and AFTER refs are needed")
    work = Path(tempfile.mkdtemp(prefix="kafkapy-fetch-path-"))
    trees: dict[str, Path] = {}
    made: list[Path] = []
    results: dict[str, list[float]] = {"before": [], "after": []}
    info: dict[str, dict] = {}
    children: dict[str, subprocess.Popen] = {}
    try:
        for label in ("before", "after"):
            ref = getattr(args, label)
            if Path(ref).is_dir():
                trees[label] = Path(ref).resolve()
            else:
                trees[label] = work / label
                git("worktree", "add", "--detach", str(trees[label]), git("rev-parse", "--verify", f"{ref}^{{commit}}"))
                made.append(trees[label])
        for label in ("before", "after"):
            env = dict(os.environ, PYTHONPATH=str(trees[label]))
            children[label] = subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve()), "--child", "--version-cap", str(args.version_cap)],
                cwd=trees[label], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            ready = json.loads(children[label].stdout.readline() or "{}")
            if not ready.get("ready"):
                raise RuntimeError(f"{label} child did not start (exit {children[label].poll()})")
            if not ready["kafkapy"].startswith(str(trees[label])):
                raise RuntimeError(f"{label}: imported {ready['kafkapy']}, not from {trees[label]}")
            info[label] = ready
        for round_ in range(args.rounds):
            for label in (("before", "after") if round_ % 2 == 0 else ("after", "before")):
                children[label].stdin.write(f"{args.fetches}\n")
                children[label].stdin.flush()
                out = json.loads(children[label].stdout.readline())
                results[label].append(out["us_per_fetch"])
            print(f"[round {round_ + 1}/{args.rounds}] before {results['before'][-1]:.1f}, after "
                  f"{results['after'][-1]:.1f} us/fetch", file=sys.stderr)
    finally:
        for proc in children.values():
            if proc.stdin:
                proc.stdin.close()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        for tree in made:
            try:
                git("worktree", "remove", "--force", str(tree))
            except RuntimeError as error:
                print(f"warning: {error}", file=sys.stderr)
        shutil.rmtree(work, ignore_errors=True)
    before, after = statistics.median(results["before"]), statistics.median(results["after"])
    pairs = sorted(b / a for b, a in zip(results["before"], results["after"]))
    quart = len(pairs) // 4
    low_b, low_a = min(results["before"]), min(results["after"])
    print("| request | before us/fetch | after | ratio (of medians) | median of paired ratios | middle half "
          "| fastest loop before | after | ratio | pairs |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    print(f"| Fetch v{info['after']['version']}, 8 partitions x 1 MiB, sessionless | {before:.1f} | {after:.1f} | "
          f"{before / after:.3f} | {statistics.median(pairs):.3f} | {pairs[quart]:.2f}–{pairs[-quart - 1]:.2f} | "
          f"{low_b:.1f} | {low_a:.1f} | {low_b / low_a:.3f} | {len(pairs)} |")
    print(json.dumps({"before": results["before"], "after": results["after"], "versions":
                      {k: v["version"] for k, v in info.items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
