"""`kafkapy produce`: lines from stdin (or a file) to a topic, in the spirit of kcat -P."""
from __future__ import annotations

import argparse
import random
import sys
import time

from ..protocol.compression import CODECS_BY_NAME
from ..protocol.messages import ProduceRequest
from ..protocol.records import build_batch
from .client import AdminClient, topic_partitions
from .errors import CliError, KafkaApiError
from .output import print_json

__all__ = ["produce", "murmur2", "default_partition", "parse_header"]

_BATCH_BYTES = 1 << 20
_BATCH_RECORDS = 10_000


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (Utils.murmur2), as the Java client hashes keys to partitions."""
    m, r = 0x5BD1E995, 24
    length = len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    tail = length % 4
    base = length - tail
    if tail == 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def default_partition(key: bytes, partitions: int) -> int:
    """The Java client's partition for a keyed record."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def parse_header(text: str) -> tuple[str, bytes]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise CliError(f"bad header {text!r}: expected NAME=VALUE", exit_code=2)
    return name, value.encode()


def _unescape(text: str | None) -> str | None:
    if text is None:
        return None
    return text.encode().decode("unicode_escape")


def produce(client: AdminClient, args: argparse.Namespace) -> int:
    if args.compression not in CODECS_BY_NAME:
        raise CliError(f"unknown --compression {args.compression!r}: none, gzip, snappy, lz4 or zstd", exit_code=2)
    codec = CODECS_BY_NAME[args.compression]
    acks = int(args.acks) if args.acks != "all" else -1
    if acks not in (-1, 0, 1):
        raise CliError(f"bad --acks {args.acks!r}: all, -1, 0 or 1", exit_code=2)
    partitions = topic_partitions(client, [args.topic])[args.topic]
    if args.partition is not None and args.partition not in partitions:
        raise CliError(f"partition {args.partition} of '{args.topic}' does not exist (it has {len(partitions)}); "
                       f"see `kafkapy topics describe --topic {args.topic}`")
    headers = [parse_header(h) for h in args.header or ()]
    key_delim = _unescape(args.key_delimiter)
    delimiter = _unescape(args.delimiter) or "\n"
    sticky = random.choice(partitions)
    source = open(args.file, "rb") if args.file else sys.stdin.buffer
    sender = _Sender(client, args.topic, acks, codec, int(client.timeout_s * 1000))
    total = 0
    try:
        for raw in _split(source, delimiter.encode()):
            key = None
            value = raw
            if key_delim is not None:
                k, sep, v = raw.partition(key_delim.encode())
                if sep:
                    key, value = k, v
            if args.partition is not None:
                partition = args.partition
            elif key is not None:
                partition = partitions[default_partition(key, len(partitions))]
            else:
                partition = sticky
            ts = args.timestamp if args.timestamp is not None else int(time.time() * 1000)
            sender.add(partition, (key, value, headers, ts))
            total += 1
        sender.flush()
    finally:
        if args.file:
            source.close()
    if args.format == "json":
        print_json({"topic": args.topic, "records": total,
                    "partitions": [{"partition": p, **w} for p, w in sorted(sender.offsets.items())]})
    elif args.verbose:
        print(f"Produced {total} records to {args.topic}.", file=sys.stderr)
    return 0


def _split(source, delimiter: bytes):
    """Records separated by `delimiter` (the last one without it too); empty lines are skipped, as kcat does."""
    if delimiter == b"\n":
        for line in source:
            line = line.rstrip(b"\n")
            if line.endswith(b"\r"):
                line = line[:-1]
            if line:
                yield line
        return
    data = source.read()
    for item in data.split(delimiter):
        if item:
            yield item


class _Sender:
    """Records grouped per partition into batches, sent per leader as they fill."""

    def __init__(self, client: AdminClient, topic: str, acks: int, codec: int, timeout_ms: int):
        self.client, self.topic, self.acks, self.codec, self.timeout_ms = client, topic, acks, codec, timeout_ms
        self.pending: dict[int, list] = {}
        self.sizes: dict[int, int] = {}
        self.offsets: dict[int, dict[str, int]] = {}  # partition -> first offset written, records
        self.leaders = client.leaders([topic])

    def add(self, partition: int, record: tuple) -> None:
        self.pending.setdefault(partition, []).append(record)
        size = self.sizes.get(partition, 0) + len(record[1] or b"") + len(record[0] or b"") + 32
        self.sizes[partition] = size
        if size >= _BATCH_BYTES or len(self.pending[partition]) >= _BATCH_RECORDS:
            self._send([partition])

    def flush(self) -> None:
        self._send(list(self.pending))

    def _send(self, partitions: list[int]) -> None:
        by_leader: dict[int, list[int]] = {}
        for p in partitions:
            by_leader.setdefault(self.leaders[(self.topic, p)], []).append(p)
        for leader, parts in by_leader.items():
            if leader < 0:
                raise KafkaApiError(5, f"partition {self.topic}:{parts[0]} has no leader",
                                    "wait for the broker to come back")
            data = [ProduceRequest.PartitionProduceData(index=p, records=build_batch(self.pending[p],
                                                                                     compression=self.codec))
                    for p in parts]
            request = ProduceRequest(transactional_id=None, acks=self.acks, timeout_ms=self.timeout_ms,
                                     topic_data=[ProduceRequest.TopicProduceData(name=self.topic, partition_data=data)])
            conn = self.client.node(leader)
            version = conn.version_for(ProduceRequest, cap=9, floor=3)
            counts = {p: len(self.pending.pop(p)) for p in parts}
            for p in parts:
                self.sizes[p] = 0
            if self.acks == 0:
                conn.send_only(request, version)
                continue
            response = conn.send(request, version)
            for topic in response.responses:
                for p in topic.partition_responses:
                    if p.error_code:
                        raise KafkaApiError(p.error_code, f"cannot produce to {self.topic}:{p.index}",
                                            detail=getattr(p, "error_message", None))
                    written = self.offsets.setdefault(p.index, {"first_offset": p.base_offset, "records": 0})
                    written["records"] += counts.get(p.index, 0)
