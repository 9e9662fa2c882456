#!/usr/bin/env python3
"""Cost of serving Fetch v0-3 (down-converted message sets) against Fetch v4+ (file slices).

Produces --records records of --value-size bytes (batches of --batch records, uncompressed or
--codec) into one partition of a real kafkapy broker, then reads the whole partition back with
raw Fetch requests of each version (1 MiB per partition per request) and reports records/s and
MB/s of the stored batches; also the pure v2_to_legacy conversion rate. Old-version fetches pay
Python work per record (as Kafka's down-conversion pays Java work); v4+ fetches do not.

    python bench/protocol/bench_down_conversion.py
    python bench/protocol/bench_down_conversion.py --records 200000 --codec gzip
"""
from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))

from conformance.broker_process import start_broker  # noqa: E402
from conformance.kafka_wire import RawConnection  # noqa: E402
from kafkapy.net.client import encode_request  # noqa: E402
from kafkapy.protocol.compression import GZIP, LZ4, NONE, SNAPPY  # noqa: E402
from kafkapy.protocol.headers import response_header_version  # noqa: E402
from kafkapy.protocol.legacy_records import v2_to_legacy  # noqa: E402
from kafkapy.protocol.messages import (  # noqa: E402
    RESPONSE_TYPES, ApiVersionsRequest, CreateTopicsRequest, FetchRequest, ProduceRequest,
)
from kafkapy.protocol.primitives import skip_tagged_fields  # noqa: E402
from kafkapy.protocol.records import build_batch  # noqa: E402

CODECS = {"none": NONE, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4}
PARTITION_BYTES = 1 << 20


def call(conn: RawConnection, request, version: int):
    conn.send(b"".join(encode_request(request, version, 1, "bench-down-conversion")))
    frame = conn.receive()
    pos = 4
    if response_header_version(request.API_KEY, version) == 1:
        pos = skip_tagged_fields(frame, pos)
    return RESPONSE_TYPES[request.API_KEY].decode(frame, version, pos)


def fill(conn: RawConnection, topic: str, records: int, value_size: int, batch: int, codec: int) -> int:
    Topic = CreateTopicsRequest.CreatableTopic
    created = call(conn, CreateTopicsRequest(topics=[Topic(name=topic, num_partitions=1, replication_factor=1)],
                                             timeout_ms=10_000), 4)
    assert created.topics[0].error_code == 0, created
    value = b"x" * value_size
    stored = 0
    for start in range(0, records, batch):
        n = min(batch, records - start)
        payload = build_batch([(b"k%d" % (start + i), value, (), 1_700_000_000_000) for i in range(n)],
                              compression=codec)
        stored += len(payload)
        request = ProduceRequest(acks=1, timeout_ms=10_000, topic_data=[ProduceRequest.TopicProduceData(
            name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=0, records=payload)])])
        assert call(conn, request, 7).responses[0].partition_responses[0].error_code == 0
    return stored


def read_all(conn: RawConnection, topic: str, version: int, records: int) -> tuple[float, int]:
    """Seconds to fetch every record from offset 0, and the response bytes."""
    offset = 0
    received = 0
    started = time.perf_counter()
    while offset < records:
        request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=PARTITION_BYTES, topics=[
            FetchRequest.FetchTopic(topic=topic, partitions=[
                FetchRequest.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=PARTITION_BYTES)])])
        data = call(conn, request, version).responses[0].partitions[0]
        assert data.error_code == 0, data
        raw = bytes(data.records)
        received += len(raw)
        offset = next_offset(raw, version)
    return time.perf_counter() - started, received


def next_offset(raw: bytes, version: int) -> int:
    """The offset after the last whole batch (v4+) or top-level message (v0-3) of a fetch answer,
    read from headers only so that the client side costs next to nothing."""
    from kafkapy.protocol.records import iter_batch_headers

    if version >= 4:
        last = None
        for header in iter_batch_headers(raw, validate=False):
            last = header
        return last.last_offset + 1
    pos, last = 0, -1
    while pos + 12 <= len(raw):
        last = int.from_bytes(raw[pos:pos + 8], "big")
        pos += 12 + int.from_bytes(raw[pos + 8:pos + 12], "big")
    return last + 1


class LatencyProbe:
    """ApiVersions round trips on a second connection while the fetches run: does the broker keep
    answering other clients while it converts?"""

    def __init__(self, bootstrap: str):
        self.conn = RawConnection(bootstrap, 30)
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.perf_counter()
            call(self.conn, ApiVersionsRequest(), 0)
            self.samples.append((time.perf_counter() - started) * 1000)
            time.sleep(0.002)

    def __enter__(self) -> "LatencyProbe":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(10)
        self.conn.close()

    def summary(self) -> str:
        if len(self.samples) < 2:
            return "n/a"
        cuts = statistics.quantiles(self.samples, n=100, method="inclusive")
        return f"{cuts[49]:.1f} / {cuts[98]:.1f} / {max(self.samples):.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--codec", choices=sorted(CODECS), default="none")
    parser.add_argument("--versions", default="1,3,4,12")
    args = parser.parse_args()
    codec = CODECS[args.codec]
    versions = [int(v) for v in args.versions.split(",")]
    with start_broker(overrides={"num.partitions": "1"}) as broker, RawConnection(broker.bootstrap, 60) as conn:
        stored = fill(conn, "bench", args.records, args.value_size, args.batch, codec)
        print(f"{args.records} records of {args.value_size} B, batches of {args.batch}, codec {args.codec}: "
              f"{stored / 1e6:.1f} MB stored")
        with LatencyProbe(broker.bootstrap) as idle:
            time.sleep(1)
        print(f"ApiVersions round trip on an idle broker, p50 / p99 / max ms: {idle.summary()}")
        print("| Fetch version | seconds | records/s | stored MB/s | answer MB | other client's ApiVersions "
              "p50 / p99 / max ms |")
        print("|---|---|---|---|---|---|")
        for version in versions:
            read_all(conn, "bench", version, args.records)  # warm the page cache and the code
            with LatencyProbe(broker.bootstrap) as probe:
                seconds, received = read_all(conn, "bench", version, args.records)
            print(f"| v{version} | {seconds:.2f} | {args.records / seconds:,.0f} | {stored / 1e6 / seconds:.1f} | "
                  f"{received / 1e6:.1f} | {probe.summary()} |")
    value = b"x" * args.value_size
    chunk = b"".join(build_batch([(b"k", value, (), 1_700_000_000_000)] * args.batch, base_offset=i * args.batch,
                                 compression=codec) for i in range(max(1, 10_000 // args.batch)))
    count = max(1, 10_000 // args.batch) * args.batch
    for magic in (0, 1):
        started = time.perf_counter()
        rounds = 5
        for _ in range(rounds):
            v2_to_legacy(chunk, magic)
        seconds = time.perf_counter() - started
        print(f"v2_to_legacy to magic {magic}: {count * rounds / seconds:,.0f} records/s")


if __name__ == "__main__":
    main()
