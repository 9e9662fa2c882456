"""Record batch layer vs kafka-python's record classes, measured side by side in one process.

Run: python bench/protocol/bench_records.py [--quick]
Prints, per operation, microseconds per call for kafkapy and kafka-python and the ratio
(kafka-python time / kafkapy time; > 1 means kafkapy is faster).
"""
from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder  # noqa: E402
from kafka.record.legacy_records import LegacyRecordBatchBuilder  # noqa: E402
from kafka.record.memory_records import MemoryRecords  # noqa: E402

from kafkapy.protocol.legacy_records import iter_legacy_records, legacy_to_v2  # noqa: E402
from kafkapy.protocol.records import build_batch, iter_records, validate_batch  # noqa: E402

CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def sample(n: int, value_size: int):
    rng = random.Random(1)
    return [(b"key-%d" % i, rng.randbytes(value_size // 2) + b"x" * (value_size // 2), [("trace", b"abc")],
             1_700_000_000_000 + i) for i in range(n)]


def kp_build(records, codec):
    builder = DefaultRecordBatchBuilder(2, codec, False, -1, -1, -1, 1 << 30)
    for i, (k, v, h, ts) in enumerate(records):
        builder.append(i, ts, k, v, h)
    return bytes(builder.build())


def per_call_us(fn, seconds: float) -> float:
    calls = 0
    start = time.perf_counter()
    while True:
        fn()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return elapsed / calls * 1e6


def compare(ours, theirs, budget: float, rounds: int = 5) -> tuple[float, float]:
    """Best-of-rounds microseconds per call, alternating the two so machine noise hits both."""
    ours()
    theirs()
    best_ours = best_theirs = float("inf")
    for _ in range(rounds):
        best_ours = min(best_ours, per_call_us(ours, budget / rounds))
        best_theirs = min(best_theirs, per_call_us(theirs, budget / rounds))
    return best_ours, best_theirs


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    budget = 0.3 if parser.parse_args().quick else 1.5
    rows = []
    records = sample(1000, 100)

    def row(name, ours, theirs):
        a, b = compare(ours, theirs, budget)
        rows.append((name, a, b, b / a))

    batch = build_batch(records)
    row("validate_batch (1000 rec, 130 KB)", lambda: validate_batch(batch),
        lambda: DefaultRecordBatch(batch).validate_crc())
    for codec in CODECS:
        batch = build_batch(records, compression=codec)
        row(f"decode 1000 records, {CODECS[codec]}", lambda b=batch: sum(1 for _ in iter_records(b)),
            lambda b=batch: sum(1 for _ in DefaultRecordBatch(b)))
    for codec in (0, 3):
        row(f"build 1000 records, {CODECS[codec]}", lambda c=codec: build_batch(records, compression=c),
            lambda c=codec: kp_build(records, c))
    legacy_builder = LegacyRecordBatchBuilder(1, 1, 1 << 30)
    for i, (k, v, _, ts) in enumerate(records):
        legacy_builder.append(i, ts, k, v)
    legacy = bytes(legacy_builder.build())

    def kp_legacy():
        mr = MemoryRecords(legacy)
        n = 0
        while (b := mr.next_batch()) is not None:
            n += sum(1 for _ in b)
        return n
    row("decode legacy v1 gzip set, 1000 msgs", lambda: sum(1 for _ in iter_legacy_records(legacy)), kp_legacy)
    row("legacy_to_v2 (ours) vs kafka-python decode+build", lambda: legacy_to_v2(legacy),
        lambda: kp_build([(m.key, m.value, [], m.timestamp) for b in [MemoryRecords(legacy).next_batch()]
                          for m in b], 1))

    print(f"{'operation':55} {'kafkapy us':>12} {'kafka-python us':>16} {'ratio':>7}")
    for name, a, b, r in rows:
        print(f"{name:55} {a:12.1f} {b:16.1f} {r:7.2f}")


if __name__ == "__main__":
    main()
