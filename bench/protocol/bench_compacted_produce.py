"""What the compacted-topic key check costs on the produce path, per batch, in one process.

Run: python bench/protocol/bench_compacted_produce.py [--records 100] [--value-size 100] [--broker N]

Prints, per codec, microseconds per batch for what produce already does to every batch
(header parse + CRC32C: validate_batch) and for the key check that compacted topics add
(keyless_record_indexes: decompress + walk the record lengths), next to a full record decode
(iter_records) for scale. Also the cost of the test every non-compacted partition now pays
(the inline test in handle_produce that decides whether records are read). Best of several
rounds; other processes add noise. With --broker N, also N keyed records produced with
confluent-kafka (lz4, acks=1) to a plain and to a compacted topic of one kafkapy process,
alternating, best rate of 3 rounds each.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kafkapy.log.config import LONG_MAX, LogConfig  # noqa: E402
from kafkapy.protocol.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD, codec_name  # noqa: E402
from kafkapy.protocol.records import build_batch, iter_records, keyless_record_indexes, validate_batch  # noqa: E402


def best_us(fn, rounds: int = 7, min_time: float = 0.05) -> float:
    """Best per-call time in microseconds over `rounds` rounds of at least `min_time` seconds."""
    n = 1
    while True:
        start = time.perf_counter()
        for _ in range(n):
            fn()
        if time.perf_counter() - start >= min_time:
            break
        n *= 2
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - start) / n)
    return best * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--broker", type=int, default=0, help="also produce this many records through a broker")
    args = parser.parse_args()
    value = bytes(range(256)) * (args.value_size // 256 + 1)
    records = [(f"key-{i}".encode(), value[i % 7: i % 7 + args.value_size]) for i in range(args.records)]
    print(f"{args.records} records of {args.value_size} B values per batch; Python {sys.version.split()[0]}")
    print("| codec | batch bytes | validate_batch (us) | key check (us) | key check / validate | full decode (us) |")
    print("|---|---|---|---|---|---|")
    for codec in (NONE, GZIP, SNAPPY, LZ4, ZSTD):
        batch = build_batch(records, compression=codec)
        header = validate_batch(batch)
        assert keyless_record_indexes(batch, header) == []
        validate = best_us(lambda: validate_batch(batch))
        check = best_us(lambda: keyless_record_indexes(batch, header))
        decode = best_us(lambda: sum(1 for _ in iter_records(batch, header)))
        print(f"| {codec_name(codec)} | {len(batch)} | {validate:.1f} | {check:.1f} | {check / validate:.1f}x "
              f"| {decode:.1f} |")
    config = LogConfig()

    def gate() -> bool:  # the test handle_produce makes per partition
        return ("compact" in config.cleanup_policy or config.message_timestamp_before_max_ms != LONG_MAX
                or config.message_timestamp_after_max_ms != LONG_MAX)

    assert not gate()
    cost = best_us(gate) - best_us(lambda: None)
    print(f"\nnon-compacted partition without timestamp limits, added per produced partition: {cost * 1000:.0f} ns")
    if args.broker:
        broker_rates(args.broker, args.value_size)


def broker_rates(count: int, value_size: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from conformance.broker_process import start_broker

    broker = start_broker(overrides={"num.partitions": "1"})
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        topics = {"plain": "delete", "compacted": "compact"}
        for future in admin.create_topics([NewTopic(f"bench-{name}", 1, 1, config={"cleanup.policy": policy})
                                           for name, policy in topics.items()]).values():
            future.result(30)
        del admin
        value = b"v" * value_size
        best = {name: 0.0 for name in topics}
        for _ in range(3):
            for name in topics:
                producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "acks": 1,
                                     "compression.type": "lz4", "queue.buffering.max.messages": count + 1})
                start = time.perf_counter()
                for i in range(count):
                    producer.produce(f"bench-{name}", value, key=b"key-%d" % (i % 1000))
                    if i % 10_000 == 0:
                        producer.poll(0)
                assert producer.flush(120) == 0
                best[name] = max(best[name], count / (time.perf_counter() - start))
                del producer  # librdkafka's handle is destroyed here, before the broker stops
        print(f"\nconfluent-kafka, {count} records of {value_size} B, lz4, acks=1 (records/s, best of 3):")
        for name, rate in best.items():
            print(f"  {name}: {rate:,.0f}")
        print(f"  compacted / plain: {best['compacted'] / best['plain']:.2f}")
    finally:
        broker.close()

if __name__ == "__main__":
    main()
