"""Message codec vs kafka-python's protocol classes, measured side by side in one process.

Run: python bench/protocol/bench_protocol.py [--quick] [--markdown]
Prints, per operation, calls per CPU-second for kafkapy and kafka-python and the ratio
(kafkapy ops/s / kafka-python ops/s; > 1 means kafkapy is faster). Each side is timed in
alternating rounds and the best round counts, which damps noise from other processes.
Two peers: kafka-python's current `kafka.protocol` classes at the same versions, and its older
`kafka.protocol.old` Struct classes at the newest versions they have.
"""
from __future__ import annotations

import argparse
import platform
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kafka.protocol.consumer.fetch import FetchRequest as KpFetchRequest  # noqa: E402
from kafka.protocol.consumer.fetch import FetchResponse as KpFetchResponse  # noqa: E402
from kafka.protocol.metadata.metadata import MetadataResponse as KpMetadataResponse  # noqa: E402
from kafka.protocol.producer.produce import ProduceRequest as KpProduceRequest  # noqa: E402

from kafka.protocol.old.fetch import FetchRequest_v11, FetchResponse_v11  # noqa: E402
from kafka.protocol.old.metadata import MetadataResponse_v8  # noqa: E402
from kafka.protocol.old.produce import ProduceRequest_v8  # noqa: E402

from kafkapy.protocol.messages import (  # noqa: E402
    FetchRequest, FetchResponse, MetadataResponse, ProduceRequest,
)
from kafkapy.protocol.records import build_batch  # noqa: E402

TOPIC_IDS = [uuid.UUID(int=(i + 1) * 0x1234567890ABCDEF) for i in range(100)]


# ---- workloads ---------------------------------------------------------------------------

class Structs:
    """Struct classes by name: ours hang off the message class, kafka-python's are nested."""

    def __init__(self, cls):
        self.cls = cls

    def __getattr__(self, name):
        stack = [self.cls]
        while stack:
            owner = stack.pop()
            found = owner.__dict__.get(name)
            if isinstance(found, type):
                return found
            stack += [v for v in vars(owner).values() if isinstance(v, type) and v is not owner
                      and v.__module__.startswith("kafka")]
        raise AttributeError(name)

    def __call__(self, *args, **kwargs):
        return self.cls(*args, **kwargs)


def produce_request(version: int = 9) -> bytes:
    """A Produce request: one topic, one partition, one 1 MiB record batch."""
    value = bytes(range(256)) * 4
    batch = build_batch([(b"k%d" % i, value) for i in range(1000)], base_timestamp=1_700_000_000_000)
    padding = (1 << 20) - len(batch)
    if padding > 0:   # top up to exactly 1 MiB with a last, bigger record
        batch = build_batch([(b"k%d" % i, value) for i in range(999)]
                            + [(b"k999", value + b"p" * (padding - 3))],
                            base_timestamp=1_700_000_000_000)
    req = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=30000, topic_data=[
        ProduceRequest.TopicProduceData(name="bench-topic", partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=batch)])])
    return req.encode(version)


def metadata_response(cls, v: int, kp: bool, topics: int = 100, partitions: int = 10):
    """A Metadata v12 response for topics x partitions, 3 brokers, replication factor 3."""
    extra = {"version": v} if kp else {}
    cls = Structs(cls)
    # kafka-python models authorized operations as a bit set, None meaning "not requested"
    ops = {"authorized_operations": None} if kp else {"topic_authorized_operations": -2**31}

    def part(i):
        replicas = [(i + k) % 3 for k in range(3)]
        return cls.MetadataResponsePartition(
            error_code=0, partition_index=i, leader_id=replicas[0], leader_epoch=7,
            replica_nodes=replicas, isr_nodes=replicas, offline_replicas=[], **extra)

    def topic(t):
        return cls.MetadataResponseTopic(
            error_code=0, name=f"topic-{t:03d}", topic_id=TOPIC_IDS[t], is_internal=False,
            partitions=[part(i) for i in range(partitions)], **ops, **extra)

    brokers = [cls.MetadataResponseBroker(node_id=n, host=f"broker-{n}.example", port=9092,
                                          rack=None, **extra) for n in range(3)]
    return cls(throttle_time_ms=0, brokers=brokers, cluster_id="kafkapy-bench-cluster",
               controller_id=0, topics=[topic(t) for t in range(topics)], **extra)


def fetch_request(cls, v: int, kp: bool):
    """A Fetch v13 request for 10 topics x 10 partitions."""
    extra = {"version": v} if kp else {}
    cls = Structs(cls)
    topics = [cls.FetchTopic(topic=f"topic-{t:03d}", topic_id=TOPIC_IDS[t], partitions=[
        cls.FetchPartition(partition=p, current_leader_epoch=5, fetch_offset=1000 + p,
                           last_fetched_epoch=4, log_start_offset=-1,
                           partition_max_bytes=1 << 20, **extra)
        for p in range(10)], **extra) for t in range(10)]
    return cls(replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=50 << 20,
               isolation_level=1, session_id=0, session_epoch=-1, topics=topics,
               forgotten_topics_data=[], rack_id="", **extra)


def fetch_response(cls, v: int, kp: bool, batch: bytes):
    """A Fetch v13 response for 10 topics x 10 partitions, each with a small record batch."""
    extra = {"version": v} if kp else {}
    cls = Structs(cls)
    topics = [cls.FetchableTopicResponse(topic=f"topic-{t:03d}", topic_id=TOPIC_IDS[t], partitions=[
        cls.PartitionData(partition_index=p, error_code=0, high_watermark=5000 + p,
                          last_stable_offset=5000 + p, log_start_offset=0,
                          aborted_transactions=None, preferred_read_replica=-1,
                          records=batch, **extra)
        for p in range(10)], **extra) for t in range(10)]
    return cls(throttle_time_ms=0, error_code=0, session_id=1234, responses=topics, **extra)


# ---- timing ------------------------------------------------------------------------------

def best_rate(fn, budget: float, rounds: int) -> float:
    """Best calls per CPU-second over `rounds` rounds of about `budget` seconds each.

    CPU time of this process rather than wall time: the machine's cores are shared with other
    work, and CPU time is what the codec costs.
    """
    clock = time.process_time
    fn()
    calls = 1
    while True:   # calibrate: calls per ~budget/10
        start = clock()
        for _ in range(calls):
            fn()
        elapsed = clock() - start
        if elapsed > budget / 10:
            break
        calls *= 2
    per_round = max(1, int(calls / elapsed * budget))
    best = 0.0
    for _ in range(rounds):
        start = clock()
        for _ in range(per_round):
            fn()
        best = max(best, per_round / (clock() - start))
    return best


def compare(ours, theirs, budget: float, rounds: int) -> tuple[float, float]:
    """Time both sides in alternating rounds; returns (ours ops/s, theirs ops/s)."""
    a = b = 0.0
    for _ in range(rounds):
        a = max(a, best_rate(ours, budget / rounds, 1))
        b = max(b, best_rate(theirs, budget / rounds, 1))
    return a, b


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="shorter runs (noisier)")
    parser.add_argument("--markdown", action="store_true", help="print a markdown table")
    args = parser.parse_args()
    budget, rounds = (0.6, 3) if args.quick else (3.0, 6)

    cases = []
    legacy = []   # kafka-python's older Struct classes (kafka.protocol.old), at their newest versions

    produce = produce_request(9)
    mine = ProduceRequest.decode(produce, 9)
    theirs = KpProduceRequest.decode(produce, version=9)
    assert bytes(mine.topic_data[0].partition_data[0].records) == \
        bytes(theirs.topic_data[0].partition_data[0].records)
    cases.append(("decode Produce v9 request, one 1 MiB batch", "v9",
                  lambda: ProduceRequest.decode(produce, 9),
                  lambda: KpProduceRequest.decode(produce, version=9)))
    produce8 = produce_request(8)
    legacy.append(("decode Produce request, one 1 MiB batch", "v8",
                   lambda: ProduceRequest.decode(produce8, 8),
                   lambda: ProduceRequest_v8.decode(produce8)))

    meta_ours = metadata_response(MetadataResponse, 12, kp=False)
    meta_theirs = metadata_response(KpMetadataResponse, 12, kp=True)
    assert meta_ours.encode(12) == meta_theirs.encode(version=12)
    cases.append(("encode Metadata v12 response, 100 topics x 10 partitions", "v12",
                  lambda: meta_ours.encode(12), lambda: meta_theirs.encode(version=12)))
    meta_legacy = MetadataResponse_v8.decode(meta_ours.encode(8))
    assert meta_legacy.encode() == meta_ours.encode(8)
    legacy.append(("encode Metadata response, 100 topics x 10 partitions", "v8",
                   lambda: meta_ours.encode(8), meta_legacy.encode))

    fetch_req = fetch_request(FetchRequest, 13, kp=False).encode(13)
    assert fetch_request(KpFetchRequest, 13, kp=True).encode(version=13) == fetch_req
    cases.append(("decode Fetch v13 request, 10 topics x 10 partitions", "v13",
                  lambda: FetchRequest.decode(fetch_req, 13),
                  lambda: KpFetchRequest.decode(fetch_req, version=13)))
    fetch_req11 = fetch_request(FetchRequest, 11, kp=False).encode(11)
    assert FetchRequest_v11.decode(fetch_req11).encode() == fetch_req11
    legacy.append(("decode Fetch request, 10 topics x 10 partitions", "v11",
                   lambda: FetchRequest.decode(fetch_req11, 11),
                   lambda: FetchRequest_v11.decode(fetch_req11)))

    small_batch = build_batch([(b"key", b"v" * 100)] * 3, base_timestamp=1_700_000_000_000)
    resp_ours = fetch_response(FetchResponse, 13, False, small_batch)
    resp_theirs = fetch_response(KpFetchResponse, 13, True, small_batch)
    assert resp_ours.encode(13) == resp_theirs.encode(version=13)
    cases.append(("encode Fetch v13 response, 100 partitions x 3-record batch", "v13",
                  lambda: resp_ours.encode_parts(13), lambda: resp_theirs.encode(version=13)))
    resp_legacy = FetchResponse_v11.decode(resp_ours.encode(11))
    assert resp_legacy.encode() == resp_ours.encode(11)
    legacy.append(("encode Fetch response, 100 partitions x 3-record batch", "v11",
                   lambda: resp_ours.encode_parts(11), resp_legacy.encode))

    main_rows = measure(cases, budget, rounds, args.markdown)
    legacy_rows = measure(legacy, budget, rounds, args.markdown)
    if args.markdown:
        import kafka
        print(f"Run {time.strftime('%Y-%m-%d')} on {platform.machine()} (2 cores shared with other "
              f"work), Python {platform.python_version()}, kafka-python {kafka.__version__}; "
              f"best of {rounds} alternating rounds of CPU time per side.\n")
        print("Against kafka-python's `kafka.protocol` classes (JSON-driven, with per-version "
              "compiled codecs of their own):\n")
        print_table(main_rows)
        print("\nAgainst kafka-python's older hand-written Struct classes (`kafka.protocol.old`, "
              "the kafka-python 2.x design), which stop at these versions, so both sides run the "
              "version shown:\n")
        print_table(legacy_rows)


def measure(cases, budget: float, rounds: int, quiet: bool) -> list:
    rows = []
    for name, version, ours, kp in cases:
        a, b = compare(ours, kp, budget, rounds)
        rows.append((name, version, a, b, a / b))
        if not quiet:
            print(f"{name:58s} {version:>4s}  kafkapy {a:10,.0f}/s  kafka-python {b:10,.0f}/s"
                  f"  ratio {a / b:5.2f}x", flush=True)
    return rows


def print_table(rows) -> None:
    print("| operation | version | kafkapy ops/s | kafka-python ops/s | ratio |")
    print("|---|---|---|---|---|")
    for name, version, a, b, ratio in rows:
        print(f"| {name} | {version} | {a:,.0f} | {b:,.0f} | **{ratio:.2f}x** |")


if __name__ == "__main__":
    main()
