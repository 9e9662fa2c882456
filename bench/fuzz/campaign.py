#!/usr/bin/env python3
"""Fuzz campaign: mutated requests of every API and version against a running kafkapy broker.

Requests come from four generators, mixed by weight:
- `seed`: a real client's request (bench/fuzz/seed_requests.txt, recorded by capture_seeds.py) with
  byte-level damage (flips, extreme int16/int32 lengths and counts, overlong varints, truncation,
  inserted garbage, duplicated slices), or now and then unchanged;
- `schema`: a request of a random advertised API and version built from kafkapy's generated schema
  with odd values (nulls where allowed, empty/long/odd strings, negative and maximal integers,
  unknown enum codes, 0-3 array elements), half of them byte-damaged as well;
- `null`: a plausible request with one nullable field set to null;
- `header`: a plausible request under a damaged header (unadvertised versions, unknown api keys,
  null or negative-length client ids).

`--connections` asyncio connections send one request at a time each and wait up to `--wait`
seconds for its answer; a close or silence reconnects. Every `--check-every` requests a fresh
connection must get ApiVersions and Metadata answered within 10 s. A broker that exits counts as a
crash (and is restarted when the campaign started it). The broker's log is scanned for ERROR lines
and tracebacks. The summary (JSON and markdown) goes to `--out`.

    python bench/fuzz/campaign.py --requests 1000000 --connections 24      # starts its own broker
    python bench/fuzz/campaign.py --bootstrap 127.0.0.1:9092 --requests 50000

conformance/test_fuzz_slice.py runs a CI-sized slice through `run_campaign`.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import platform
import random
import re
import struct
import sys
import time
from collections import Counter, defaultdict, deque
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from conformance.request_fuzzer import (  # noqa: E402
    KNOWN_TOPIC,
    Outcome,
    WireClient,
    build_request,
    encode_request,
    mutate_bytes,
    nullable_paths,
    request_class,
    request_header,
    response_body,
    set_path,
)
from kafkapy.protocol.messages import (  # noqa: E402
    ApiVersionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    MetadataRequest,
)

SEEDS = Path(__file__).with_name("seed_requests.txt")
ERROR_LINE = re.compile(r"^\[[^\]]*\] (ERROR|CRITICAL) (.*)$|^Traceback ", re.MULTILINE)
WEIGHTS = {"seed": 30, "schema": 45, "null": 10, "header": 15}


@dataclass
class Summary:
    requests: int = 0
    seconds: float = 0.0
    crashes: int = 0
    liveness_checks: int = 0
    liveness_failures: int = 0
    liveness_max_ms: float = 0.0
    error_lines: int = 0
    traceback_count: int = 0
    warning_lines: int = 0
    log_bytes: int = 0
    error_samples: list[str] = field(default_factory=list)
    by_generator: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))
    by_api: dict[int, Counter] = field(default_factory=lambda: defaultdict(Counter))
    encode_skips: int = 0
    topics_deleted: int = 0      # topics the campaign created, deleted at each liveness check
    partition_skips: int = 0     # requests replaced because they would create > MAX_NEW_PARTITIONS
    suspects: list[str] = field(default_factory=list)   # "kind key version hex" around a liveness failure

    def as_dict(self) -> dict:
        return {
            "requests": self.requests, "seconds": round(self.seconds, 1),
            "requests_per_second": round(self.requests / self.seconds) if self.seconds else 0,
            "crashes": self.crashes, "liveness_checks": self.liveness_checks,
            "liveness_failures": self.liveness_failures, "liveness_max_ms": round(self.liveness_max_ms, 1),
            "error_lines": self.error_lines, "tracebacks": self.traceback_count,
            "warning_lines": self.warning_lines, "log_bytes": self.log_bytes,
            "error_samples": self.error_samples[:20], "encode_skips": self.encode_skips,
            "topics_deleted": self.topics_deleted, "partition_skips": self.partition_skips, "suspects": self.suspects[:200],
            "by_generator": {k: dict(v) for k, v in sorted(self.by_generator.items())},
            "by_api": {str(k): dict(v) for k, v in sorted(self.by_api.items())},
        }


def load_seeds(path: Path = SEEDS) -> list[tuple[int, int, bytes]]:
    seeds = []
    if path.exists():
        for line in path.read_text().splitlines():
            key, version, hexed = line.split()
            seeds.append((int(key), int(version), bytes.fromhex(hexed)))
    return seeds


CREATE_TOPICS, CREATE_PARTITIONS = 19, 37
MAX_NEW_PARTITIONS = 200


def _new_partitions(key: int, version: int, frame: bytes) -> int:
    """Partitions a CreateTopics/CreatePartitions frame asks for, as the broker would decode it (0 if
    it would not decode: the broker closes the connection then)."""
    from kafkapy.protocol.headers import decode_request_header

    try:
        header, pos = decode_request_header(frame[4:])
        request = request_class(header.api_key).decode(frame[4:], header.api_version, pos)
    except Exception:
        return 0
    if header.api_key == CREATE_TOPICS:
        return sum(len(t.assignments) or max(t.num_partitions, 1) for t in request.topics)
    if header.api_key == CREATE_PARTITIONS:
        return sum(max(t.count, 0) for t in request.topics)
    return 0


class RequestSource:
    """Mutated request frames, deterministic for a seed: (generator name, api key, version, frame)."""

    def __init__(self, versions: dict[int, tuple[int, int]], seeds: list[tuple[int, int, bytes]],
                 rng: random.Random) -> None:
        self.versions = versions
        self.pairs = [(k, v) for k, (lo, hi) in sorted(versions.items()) for v in range(lo, hi + 1)]
        self.nullable = [(k, v, p) for k, v in self.pairs for p in nullable_paths(request_class(k), v)]
        self.seeds = seeds
        self.rng = rng
        self.names = list(WEIGHTS)
        self.weights = [WEIGHTS[n] for n in self.names]
        self.encode_skips = 0
        self.partition_skips = 0

    def next(self, correlation_id: int) -> tuple[str, int, int, bytes]:
        """The next request; one that would create more than MAX_NEW_PARTITIONS partitions is
        replaced (creating partitions is legitimate work that holds the event loop: docs/fuzzing.md)."""
        while True:
            kind, key, version, frame = self._next(correlation_id)
            if key not in (CREATE_TOPICS, CREATE_PARTITIONS) or _new_partitions(key, version, frame) <= MAX_NEW_PARTITIONS:
                return kind, key, version, frame
            self.partition_skips += 1

    def _next(self, correlation_id: int) -> tuple[str, int, int, bytes]:
        rng = self.rng
        kind = rng.choices(self.names, self.weights)[0]
        if kind == "seed" and not self.seeds:
            kind = "schema"
        if kind == "seed":
            key, version, body = rng.choice(self.seeds)
            body = body[:4] + struct.pack(">i", correlation_id) + body[8:]
            frame = struct.pack(">i", len(body)) + body
            if rng.random() < 0.9:
                frame = mutate_bytes(frame, rng)
            return kind, key, version, frame
        if kind == "null" and self.nullable:
            key, version, path = rng.choice(self.nullable)
            request = build_request(request_class(key), version, rng)
            set_path(request, path, None)
            return kind, key, version, encode_request(request, version, correlation_id)
        key, version = rng.choice(self.pairs)
        if kind == "header":
            request = build_request(request_class(key), version, rng)
            body = request.encode(version)
            choice = rng.randrange(4)
            if choice == 0:
                version = rng.choice([-1, self.versions[key][1] + 1, 0x7FFF, self.versions[key][0] - 1])
                header = request_header(key, max(-32768, version), correlation_id)
            elif choice == 1:
                key = rng.choice([-1, 7, 4, 57, 68, 1000, 0x7FFF])
                header = request_header(key, 0, correlation_id)
            elif choice == 2:
                header = request_header(key, version, correlation_id, client_id=None)
            else:
                header = request_header(key, version, correlation_id)[:8] + struct.pack(">h", rng.choice([-2, 0x7FFF]))
            frame = header + body
            return kind, key, version, struct.pack(">i", len(frame)) + frame
        try:
            request = build_request(request_class(key), version, rng, odd=True)
            frame = encode_request(request, version, correlation_id)
        except Exception:   # an odd value this version cannot encode: a plausible request instead
            self.encode_skips += 1
            frame = encode_request(build_request(request_class(key), version, rng), version, correlation_id)
        if rng.random() < 0.5:
            frame = mutate_bytes(frame, rng)
        return "schema", key, version, frame


async def roundtrip(host: str, port: int, request, version: int, timeout: float = 10.0):
    client = WireClient(host, port)
    try:
        await client.connect(timeout)
        outcome, payload = await client.exchange(encode_request(request, version, 1), 1, timeout)
        if outcome != Outcome.ANSWERED:
            raise ConnectionError(f"{type(request).__name__} v{version}: {outcome}")
        return response_body(request.API_KEY, version, payload)
    finally:
        await client.close()


async def advertised_versions(host: str, port: int) -> dict[int, tuple[int, int]]:
    response = await roundtrip(host, port, ApiVersionsRequest(), 0)
    return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}


async def delete_fuzz_topics(host: str, port: int) -> int:
    """Delete the topics the campaign's CreateTopics made (all but KNOWN_TOPIC and internal ones), so
    the broker's state stays bounded: this is a test of hostile input, not of thousands of partitions."""
    response = await roundtrip(host, port, MetadataRequest(topics=None), 1)
    names = [t.name for t in response.topics if not t.is_internal and t.name != KNOWN_TOPIC
             and not t.name.startswith("__")]
    for start in range(0, len(names), 100):
        await roundtrip(host, port, DeleteTopicsRequest(topic_names=names[start:start + 100], timeout_ms=10_000), 4)
    return len(names)


async def liveness(host: str, port: int) -> float:
    """Milliseconds for ApiVersions v3 plus Metadata v9 on a fresh connection; raises when not answered."""
    started = time.monotonic()
    await roundtrip(host, port, ApiVersionsRequest(client_software_name="fuzz-check",
                                                   client_software_version="1"), 3)
    # the campaign's own DeleteTopics may have deleted the topic: asking creates it again
    await roundtrip(host, port, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(
        name=KNOWN_TOPIC)], allow_auto_topic_creation=True), 9)
    return (time.monotonic() - started) * 1000


def scan_log(path: Path | None, summary: Summary, start: int = 0) -> None:
    if path is None or not path.exists():
        return
    with open(path, errors="replace") as f:
        f.seek(start)
        text = f.read()
    summary.log_bytes = len(text.encode())
    summary.warning_lines = text.count("] WARNING ")
    for m in ERROR_LINE.finditer(text):
        if m.group(0).startswith("Traceback"):
            summary.traceback_count += 1
            # the exception line closes the traceback: the first unindented line after it
            rest = text[m.end():].splitlines()
            line = next((r for r in rest[1:] if r and not r.startswith(" ")), "?")
            sample = f"traceback: {line}"
        else:
            summary.error_lines += 1
            sample = m.group(0)
        if sample not in summary.error_samples:
            summary.error_samples.append(sample)


async def run_campaign(host: str, port: int, requests: int, connections: int = 16, seed: int = 1,
                       wait: float = 1.0, check_every: int = 5000, broker=None, progress: bool = False,
                       log_path: Path | None = None, suspects_path: Path | None = None) -> Summary:
    """Send `requests` mutated requests over `connections` connections; `broker` (a BrokerProcess,
    optional) is watched for exits and restarted."""
    summary = Summary()
    rng = random.Random(seed)
    versions = await advertised_versions(host, port)
    # the topic the generated requests name (ignore "already exists")
    await roundtrip(host, port, CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
        name=KNOWN_TOPIC, num_partitions=2, replication_factor=1)], timeout_ms=10_000), 4)
    source = RequestSource(versions, load_seeds(), rng)
    log_start = log_path.stat().st_size if log_path is not None and log_path.exists() else 0
    sent = 0
    correlation = 0
    lock = asyncio.Lock()
    checking = asyncio.Event()
    checking.set()
    started = time.monotonic()
    in_flight: dict[int, tuple] = {}
    recent: deque = deque(maxlen=64)

    async def check() -> None:
        nonlocal host, port
        summary.liveness_checks += 1
        if broker is not None and not broker.is_running():
            summary.crashes += 1
            print(f"broker exited at request {sent}:\n{broker.stderr_tail(40)}", file=sys.stderr)
            broker.start()
        try:
            ms = await liveness(host, port)
            summary.liveness_max_ms = max(summary.liveness_max_ms, ms)
            summary.topics_deleted += await delete_fuzz_topics(host, port)
        except (ConnectionError, OSError, asyncio.TimeoutError) as exc:
            summary.liveness_failures += 1
            print(f"liveness check failed at request {sent}: {exc!r}", file=sys.stderr)
            # the requests in flight (and the last few sent), to replay one by one
            suspects = [f"{kind} {key} {version} {frame.hex()}"
                        for kind, key, version, frame in list(in_flight.values()) + list(recent)]
            summary.suspects += suspects
            if suspects_path is not None:
                with open(suspects_path, "a") as f:
                    f.write("".join(line + "\n" for line in suspects))

    async def worker() -> None:
        nonlocal sent, correlation
        client = WireClient(host, port)
        try:
            while True:
                await checking.wait()
                async with lock:
                    if sent >= requests:
                        return
                    sent += 1
                    correlation = (correlation + 1) & 0x7FFFFFFF
                    number, cid = sent, correlation
                    kind, key, version, frame = source.next(cid)
                in_flight[id(client)] = (kind, key, version, frame)
                recent.append((kind, key, version, frame))
                try:
                    outcome, _ = await client.exchange(frame, cid, wait)
                except (ConnectionError, OSError, asyncio.TimeoutError):
                    outcome = "connect-failed"
                    await asyncio.sleep(0.05)
                in_flight.pop(id(client), None)
                summary.by_generator[kind][outcome] += 1
                summary.by_api[key][outcome] += 1
                if number % check_every == 0:
                    checking.clear()
                    try:
                        await check()
                    finally:
                        checking.set()
                    if progress:
                        rate = number / (time.monotonic() - started)
                        print(f"{number} requests, {rate:.0f}/s, crashes {summary.crashes}, "
                              f"liveness failures {summary.liveness_failures}", flush=True)
        finally:
            await client.close()

    await asyncio.gather(*(worker() for _ in range(connections)))
    await check()
    summary.requests = sent
    summary.seconds = time.monotonic() - started
    summary.encode_skips = source.encode_skips
    summary.partition_skips = source.partition_skips
    scan_log(log_path, summary, log_start)
    return summary


def markdown(summary: Summary, args: argparse.Namespace) -> str:
    d = summary.as_dict()
    lines = [
        "# kafkapy fuzz campaign",
        "",
        f"`python bench/fuzz/campaign.py --requests {args.requests} --connections {args.connections} "
        f"--processes {args.processes} --seed {args.seed}` on {platform.python_implementation()} {platform.python_version()}, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        "",
        f"- requests: {d['requests']} in {d['seconds']} s ({d['requests_per_second']}/s)",
        f"- crashes (broker exits): {d['crashes']}",
        f"- liveness checks (ApiVersions + Metadata on a fresh connection): {d['liveness_checks']}, "
        f"failed {d['liveness_failures']}, slowest {d['liveness_max_ms']} ms",
        f"- ERROR log lines: {d['error_lines']}, tracebacks: {d['tracebacks']}",
        f"- WARNING log lines: {d['warning_lines']}, log bytes written: {d['log_bytes']}",
        f"- topics created by the campaign and deleted at the checks: {d['topics_deleted']}; requests "
        f"replaced because they would create more than {MAX_NEW_PARTITIONS} partitions: {d['partition_skips']}",
        "",
        "| generator | " + " | ".join(sorted({o for c in summary.by_generator.values() for o in c})) + " |",
    ]
    outcomes = sorted({o for c in summary.by_generator.values() for o in c})
    lines.append("|---" * (len(outcomes) + 1) + "|")
    for name, counts in sorted(summary.by_generator.items()):
        lines.append(f"| {name} | " + " | ".join(str(counts.get(o, 0)) for o in outcomes) + " |")
    lines += ["", "| api key | " + " | ".join(outcomes) + " |", "|---" * (len(outcomes) + 1) + "|"]
    for key, counts in sorted(summary.by_api.items()):
        lines.append(f"| {key} | " + " | ".join(str(counts.get(o, 0)) for o in outcomes) + " |")
    if summary.error_samples:
        lines += ["", "Errors:", ""] + [f"- `{s}`" for s in summary.error_samples[:20]]
    return "\n".join(lines) + "\n"


def _share(host: str, port: int, requests: int, connections: int, seed: int, wait: float,
           check_every: int) -> dict:
    """One helper process's part of a --processes run (it watches no broker and reads no log)."""
    summary = asyncio.run(run_campaign(host, port, requests, connections, seed, wait, check_every))
    fields = ("requests", "crashes", "liveness_checks", "liveness_failures", "liveness_max_ms", "encode_skips",
              "topics_deleted", "partition_skips", "suspects")
    plain = {name: getattr(summary, name) for name in fields}
    plain["by_generator"] = {k: dict(v) for k, v in summary.by_generator.items()}
    plain["by_api"] = {k: dict(v) for k, v in summary.by_api.items()}
    return plain   # plain data: the Summary class lives in a __main__ module the parent cannot name


def merge(into: Summary, other: Summary) -> None:
    into.requests += other.requests
    into.crashes += other.crashes
    into.liveness_checks += other.liveness_checks
    into.liveness_failures += other.liveness_failures
    into.liveness_max_ms = max(into.liveness_max_ms, other.liveness_max_ms)
    into.encode_skips += other.encode_skips
    into.topics_deleted += other.topics_deleted
    into.partition_skips += other.partition_skips
    into.suspects += other.suspects
    for name, counts in other.by_generator.items():
        into.by_generator[name].update(counts)
    for key, counts in other.by_api.items():
        into.by_api[key].update(counts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", help="host:port of a running broker (default: start one)")
    parser.add_argument("--log", type=Path, help="that broker's log file, scanned for ERROR lines")
    parser.add_argument("--requests", type=int, default=1_000_000)
    parser.add_argument("--connections", type=int, default=24)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--wait", type=float, default=1.0, help="seconds to wait for each answer")
    parser.add_argument("--check-every", type=int, default=5000)
    parser.add_argument("--processes", type=int, default=1,
                        help="client processes sharing the requests (the client's Python is the bottleneck)")
    parser.add_argument("--out", type=Path, default=REPO / "build" / "fuzz")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    broker = None
    if args.bootstrap:
        host, port = args.bootstrap.rsplit(":", 1)
        log_path = args.log
    else:
        from conformance.broker_process import start_broker

        broker = start_broker()
        host, port, log_path = broker.host, broker.port, broker.log_path
        print(f"broker on {broker.bootstrap}, log {log_path}", flush=True)
    share = args.requests // args.processes
    started = time.monotonic()
    try:
        import concurrent.futures
        import multiprocessing

        with concurrent.futures.ProcessPoolExecutor(max(1, args.processes - 1),
                                                    mp_context=multiprocessing.get_context("spawn")) as pool:
            helpers = [pool.submit(_share, host, int(port), share, args.connections, args.seed + 1000 * i,
                                   args.wait, args.check_every) for i in range(1, args.processes)]
            summary = asyncio.run(run_campaign(
                host, int(port), args.requests - share * (args.processes - 1), args.connections, args.seed,
                args.wait, args.check_every, broker, progress=True, log_path=None,
                suspects_path=args.out / "suspects.txt"))
            for helper in helpers:
                plain = helper.result()
                other = Summary(**{k: v for k, v in plain.items() if k not in ("by_generator", "by_api")})
                for name, counts in plain["by_generator"].items():
                    other.by_generator[name].update(counts)
                for key, counts in plain["by_api"].items():
                    other.by_api[key].update(counts)
                merge(summary, other)
        summary.seconds = time.monotonic() - started
        if log_path is not None:
            scan_log(log_path, summary, 0)
    finally:
        if broker is not None:
            broker.stop()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "campaign.json").write_text(json.dumps(summary.as_dict(), indent=2) + "\n")
    (args.out / "campaign.md").write_text(markdown(summary, args))
    print(markdown(summary, args))
    return 0 if summary.crashes == 0 and summary.liveness_failures == 0 and summary.traceback_count == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
