"""The workload of the replication campaign: a sequence producer, a tailing consumer, the read-back check.

Every record's value names its partition and its place in that partition's sequence,
b"p{partition}-{seq:08d}", so a read-back of the topic alone says what was lost, duplicated,
reordered or invented:

    producer = SequenceProducer(bootstrap, topic, partitions=3)
    producer.start()
    ...faults...
    producer.stop()
    check = check_records(read_topic(bootstrap, topic, 3), producer.acked(), producer.sent())
    assert check.ok, check.violations

The producer is confluent-kafka with enable.idempotence=true and acks=all; a record counts as
acknowledged only when its delivery callback reports success. Records that were sent but not
acknowledged may be in the log or not, but at most once. Nothing here starts servers.
"""
from __future__ import annotations

import logging
import re
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import confluent_kafka
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from kafkapy.testing.history import READ_COMMITTED, READ_UNCOMMITTED, TXN_HEADER, History

__all__ = [
    "LogCheck",
    "SequenceProducer",
    "TXN_HEADER",
    "TailingConsumer",
    "check_records",
    "client_log",
    "decode_value",
    "encode_value",
    "high_watermarks",
    "read_topic",
    "txn_of",
]

log = logging.getLogger(__name__)

VALUE_PATTERN = re.compile(rb"p(\d+)-(\d{8})")
# Records waiting in the producer's queue; beyond this the producer thread stops sending until
# deliveries catch up, so a partition without a leader does not grow an unbounded backlog.
MAX_QUEUED = 2000
MAX_EXAMPLES = 5  # per kind of violation, in messages
CLIENT_TIMEOUT_S = 10.0
# librdkafka's own log lines (connection refused while a broker is down, ...) go here, not to stderr.
client_log = logging.getLogger(__name__ + ".rdkafka")


def encode_value(partition: int, seq: int) -> bytes:
    return b"p%d-%08d" % (partition, seq)


def decode_value(value: bytes | None) -> tuple[int, int] | None:
    """(partition, seq) of a value `encode_value` made, or None for anything else."""
    match = VALUE_PATTERN.fullmatch(value or b"")
    return (int(match[1]), int(match[2])) if match else None


def txn_of(msg: confluent_kafka.Message) -> str | None:
    for name, value in msg.headers() or ():
        if name == TXN_HEADER and value is not None:
            return value.decode()
    return None


# ------------------------------------------------------------------ producing

class SequenceProducer:
    """An idempotent acks=all producer sending each partition its own numbered sequence, in a thread.

    Sends round-robin over the partitions with an explicit partition, at about `rate` records per
    second in total. A fatal producer error (the idempotence guarantee broken by the broker) is
    recorded in `fatal_errors` and the producer is replaced, so the workload goes on.
    """

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: float = 300.0,
                 config: Mapping[str, object] | None = None, history: History | None = None) -> None:
        self.bootstrap = bootstrap
        self.history = history  # every send and its outcome also go here (kafkapy.testing.history)
        self.topic = topic
        self.partitions = partitions
        self.rate = rate
        self.config = {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": 120000,
            "socket.timeout.ms": 10000,
            "logger": client_log,
            **(config or {}),
        }
        self._lock = threading.Lock()
        self._next_seq = [0] * partitions
        self._acked: list[dict[int, int]] = [{} for _ in range(partitions)]  # seq -> offset it was acked at
        self._not_acked: list[set[int]] = [set() for _ in range(partitions)]
        self.delivery_errors: Counter[str] = Counter()
        self.fatal_errors: list[str] = []
        self.misplaced: list[str] = []  # acknowledged on another partition than the one asked for
        self._fatal = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._name = f"sequence-producer-{uuid.uuid4().hex[:6]}"
        self.flush_timeout_s = 60.0
        self.unflushed = 0  # records still undelivered when stop() gave up waiting

    # -- what happened, readable from any thread

    def acked(self) -> list[dict[int, int]]:
        """Per partition: seq -> offset of every acknowledged record."""
        with self._lock:
            return [dict(p) for p in self._acked]

    def sent(self) -> list[int]:
        """Per partition: how many records were handed to the client (seqs 0..n-1)."""
        with self._lock:
            return list(self._next_seq)

    def acked_counts(self) -> list[int]:
        with self._lock:
            return [len(p) for p in self._acked]

    def acked_total(self) -> int:
        return sum(self.acked_counts())

    def not_acked_total(self) -> int:
        with self._lock:
            return sum(len(p) for p in self._not_acked)

    # -- running

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"sequence-producer-{self.topic}", daemon=True)
        self._thread.start()

    def stop(self, flush_timeout: float | None = None) -> None:
        """Stop sending, wait (bounded) for outstanding deliveries, then drop what is left."""
        if flush_timeout is not None:
            self.flush_timeout_s = flush_timeout
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.flush_timeout_s + 30.0)
            if self._thread.is_alive():
                log.error("producer thread of %s did not end", self.topic)

    def _new_client(self) -> confluent_kafka.Producer:
        return confluent_kafka.Producer({**self.config, "error_cb": self._on_error})

    def _on_error(self, err: KafkaError) -> None:
        if err.fatal():
            with self._lock:
                self.fatal_errors.append(f"{time.strftime('%H:%M:%S')} {err.name()}: {err.str()}")
            log.error("fatal producer error on %s: %s", self.topic, err)
            self._fatal.set()

    def _on_delivery(self, err: KafkaError | None, msg: confluent_kafka.Message) -> None:
        decoded = decode_value(msg.value())
        if decoded is None:  # cannot happen: we only send encoded values
            log.error("delivery report for a value we did not send: %r", msg.value())
            return
        partition, seq = decoded
        if self.history is not None:
            if err is not None:
                self.history.failed(self._name, self.topic, partition, msg.value(), err.name())
            else:
                self.history.acked(self._name, self.topic, msg.partition(), msg.value(),
                                   -1 if msg.offset() is None else msg.offset())
        with self._lock:
            if err is not None:
                self._not_acked[partition].add(seq)
                self.delivery_errors[err.name()] += 1
            elif msg.partition() != partition:
                self.misplaced.append(f"p{partition} seq {seq} acknowledged on partition {msg.partition()}")
            else:
                offset = msg.offset()
                self._acked[partition][seq] = -1 if offset is None else offset

    def _run(self) -> None:
        producer = self._new_client()
        interval = 1.0 / self.rate
        next_at = time.monotonic()
        partition = 0
        try:
            while not self._stop.is_set():
                if self._fatal.is_set():
                    self._retire(producer, timeout=5.0)
                    self._fatal.clear()
                    producer = self._new_client()
                producer.poll(0)
                now = time.monotonic()
                if len(producer) >= MAX_QUEUED or now < next_at:
                    producer.poll(min(0.05, max(0.0, next_at - now)) or 0.05)
                    continue
                with self._lock:
                    seq = self._next_seq[partition]
                if self.history is not None:  # before produce(): the delivery report may come first
                    self.history.sent(self._name, self.topic, partition, encode_value(partition, seq))
                try:
                    producer.produce(self.topic, value=encode_value(partition, seq), partition=partition,
                                     on_delivery=self._on_delivery)
                except BufferError:
                    self._unsend(partition, seq)
                    producer.poll(0.05)
                    continue
                except KafkaException as exc:  # a fatal error surfaces here before error_cb runs
                    self._unsend(partition, seq)
                    log.error("produce to %s-%d failed: %s", self.topic, partition, exc)
                    self._fatal.set()
                    continue
                with self._lock:
                    self._next_seq[partition] = seq + 1
                partition = (partition + 1) % self.partitions
                next_at = max(next_at + interval, now - 1.0)  # no burst after a stall
        finally:
            self._retire(producer, self.flush_timeout_s)

    def _unsend(self, partition: int, seq: int) -> None:
        """produce() refused the record: it was never handed over (the seq is sent again)."""
        if self.history is not None:
            self.history.unsent(self._name, self.topic, partition, encode_value(partition, seq))

    def _retire(self, producer: confluent_kafka.Producer, timeout: float) -> None:
        """Flush with a deadline, then purge: purged records get an error callback (not acked)."""
        left = producer.flush(timeout)
        if left:
            log.warning("%d record(s) to %s undelivered after %.0f s; purging them", left, self.topic, timeout)
            producer.purge()
            left = producer.flush(5.0)
            self.unflushed += left


# ------------------------------------------------------------------ consuming

def _consumer(bootstrap: str, purpose: str, isolation: str = READ_UNCOMMITTED) -> confluent_kafka.Consumer:
    # group.id is required by the client; nothing is committed (assign mode, no auto commit).
    return confluent_kafka.Consumer({
        "isolation.level": isolation,
        "bootstrap.servers": bootstrap,
        "group.id": f"replication-{purpose}-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "socket.timeout.ms": 10000,
        "logger": client_log,
    })


def high_watermarks(bootstrap: str, topic: str, partitions: int, timeout: float = CLIENT_TIMEOUT_S) -> list[int]:
    """Each partition's high watermark, from its leader."""
    consumer = _consumer(bootstrap, "watermarks")
    try:
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout, cached=False)[1]
                for p in range(partitions)]
    finally:
        consumer.close()


class TailingConsumer:
    """A consumer reading every partition from offset 0 while the faults happen, in a thread.

    Keeps what it saw at each offset; seeing another value at an offset it already read means a
    record it was allowed to consume (below the high watermark) was later replaced.

    librdkafka 2.16 can deadlock inside a consumer when a broker leaves the metadata while an
    OffsetForLeaderEpoch request is in flight (librdkafka issue #5476), which these faults make
    likely. So `wait_caught_up` replaces a consumer that makes no progress for `STALL_S` while
    records are left, at most `MAX_RESTARTS` times, with a new one that goes on from where the old
    one stopped; the stuck thread is abandoned and what it might still deliver is ignored.
    """

    STALL_S = 20.0
    MAX_RESTARTS = 2

    def __init__(self, bootstrap: str, topic: str, partitions: int, history: History | None = None,
                 isolation: str = READ_UNCOMMITTED) -> None:
        self.bootstrap = bootstrap
        self.history = history  # every record read also goes here (kafkapy.testing.history)
        self.isolation = isolation
        self.topic = topic
        self.partitions = partitions
        self._lock = threading.Lock()
        self._seen: list[dict[int, bytes]] = [{} for _ in range(partitions)]
        self._next_offset = [0] * partitions
        self.changed: list[str] = []  # offsets read twice with different values
        self.errors: Counter[str] = Counter()
        self.restarts = 0
        self._generation = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def seen(self) -> list[dict[int, bytes]]:
        with self._lock:
            return [dict(p) for p in self._seen]

    def positions(self) -> list[int]:
        with self._lock:
            return list(self._next_offset)

    def start(self) -> None:
        generation = self._generation
        starts = [TopicPartition(self.topic, p, offset if offset > 0 else confluent_kafka.OFFSET_BEGINNING)
                  for p, offset in enumerate(self.positions())]
        self._thread = threading.Thread(target=self._run, args=(generation, starts), daemon=True,
                                        name=f"tailing-consumer-{self.topic}-{generation}")
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30.0)
            if self._thread.is_alive():
                log.error("consumer thread of %s did not end", self.topic)

    def wait_caught_up(self, targets: Sequence[int], timeout: float) -> bool:
        """Wait until the consumer has read up to `targets` (one offset per partition)."""
        deadline = time.monotonic() + timeout
        last, last_change = self.positions(), time.monotonic()
        while time.monotonic() < deadline:
            positions = self.positions()
            if all(pos >= target for pos, target in zip(positions, targets)):
                return True
            if positions != last:
                last, last_change = positions, time.monotonic()
            elif time.monotonic() - last_change > self.STALL_S and self.restarts < self.MAX_RESTARTS:
                log.warning("tailing consumer of %s made no progress for %.0f s at %s (targets %s); "
                            "replacing it (librdkafka issue #5476)", self.topic, self.STALL_S, positions,
                            list(targets))
                self.restarts += 1
                with self._lock:
                    self._generation += 1  # the old thread's records are ignored from now on
                self.start()
                last_change = time.monotonic()
            time.sleep(0.2)
        return False

    def _run(self, generation: int, starts: list[TopicPartition]) -> None:
        consumer = _consumer(self.bootstrap, "tail", self.isolation)
        try:
            consumer.assign(starts)
            while not self._stop.is_set() and generation == self._generation:
                for msg in consumer.consume(500, timeout=0.2):
                    if msg.error():
                        with self._lock:
                            self.errors[msg.error().name()] += 1
                        continue
                    self._record(generation, msg.partition(), msg.offset(), msg.value())
                    if self.history is not None and generation == self._generation:
                        self.history.read(f"tailing-consumer-{generation}", self.topic, msg.partition(),
                                          msg.offset(), msg.value(), msg.key(), self.isolation, txn_of(msg))
        finally:
            consumer.close()

    def _record(self, generation: int, partition: int, offset: int, value: bytes) -> None:
        with self._lock:
            if generation != self._generation:
                return
            before = self._seen[partition].setdefault(offset, value)
            if before != value:
                self.changed.append(f"p{partition} offset {offset}: first read {before!r}, then {value!r}")
            self._next_offset[partition] = max(self._next_offset[partition], offset + 1)


def read_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 60.0, history: History | None = None,
               isolation: str = READ_UNCOMMITTED) -> list[list[tuple[int, bytes]]]:
    """The whole topic, read from offset 0 by a fresh consumer up to the current high watermarks:
    per partition, (offset, value) in log order. Raises TimeoutError if it cannot get there in time.
    With `history`, every record is also its final read. read_committed stops at the last stable
    offset, so the high watermark is only reached past the last transaction marker: a position past
    the end counts as there."""
    ends = high_watermarks(bootstrap, topic, partitions)
    records: list[list[tuple[int, bytes]]] = [[] for _ in range(partitions)]
    next_offset = [0] * partitions
    consumer = _consumer(bootstrap, "readback", isolation)
    if history is not None:
        history.final_read_begun(topic, range(partitions), isolation)
    try:
        consumer.assign([TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        while any(pos < end for pos, end in zip(next_offset, ends)):
            if time.monotonic() > deadline:
                raise TimeoutError(f"read-back of {topic} reached {next_offset}, not {ends}, in {timeout:.0f} s")
            for msg in consumer.consume(1000, timeout=0.5):
                if msg.error():
                    log.warning("read-back of %s: %s", topic, msg.error())
                    continue
                records[msg.partition()].append((msg.offset(), msg.value()))
                next_offset[msg.partition()] = msg.offset() + 1
                if history is not None:
                    history.final_read(topic, msg.partition(), msg.offset(), msg.value(), msg.key(), isolation,
                                       txn_of(msg))
            if isolation == READ_COMMITTED and any(pos < end for pos, end in zip(next_offset, ends)):
                # the last records before the high watermark may be a commit or abort marker, which
                # a consumer never returns: its position says how far it got
                for tp in consumer.position([TopicPartition(topic, p) for p in range(partitions)]):
                    if tp.offset >= 0:
                        next_offset[tp.partition] = max(next_offset[tp.partition], tp.offset)
    finally:
        consumer.close()
    return records


# ------------------------------------------------------------------ checking

@dataclass(slots=True)
class LogCheck:
    """What a read-back of the topic says about the acknowledged records."""

    acked: int = 0
    read: int = 0
    duplicates: int = 0  # extra copies of a value, acknowledged or not
    missing: int = 0  # acknowledged and not in the log
    out_of_order: int = 0  # a value with a lower seq after a higher one in the same partition
    unexpected: int = 0  # values never sent (or not to this partition)
    moved: int = 0  # acknowledged at one offset, found at another
    unacked_present: int = 0  # sent, not acknowledged, but in the log (allowed)
    consumed_then_lost: int = 0  # read by the tailing consumer, not at that offset in the final log
    violations: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations


def check_records(records: Sequence[Sequence[tuple[int, bytes]]], acked: Sequence[Mapping[int, int]],
                  sent: Sequence[int], consumed: Sequence[Mapping[int, bytes]] = ()) -> LogCheck:
    """Check a read-back (per partition, (offset, value) in log order) against what was acknowledged
    (per partition, seq -> offset) and sent (per partition, number of seqs), and optionally against
    what a consumer saw during the run (per partition, offset -> value)."""
    check = LogCheck(acked=sum(len(a) for a in acked), read=sum(len(r) for r in records))
    for partition, partition_records in enumerate(records):
        counts: Counter[int] = Counter()
        at_offset: dict[int, bytes] = {}
        where: dict[int, int] = {}
        unexpected, backwards = [], []
        last_seq = -1
        for offset, value in partition_records:
            at_offset[offset] = value
            decoded = decode_value(value)
            if decoded is None or decoded[0] != partition or decoded[1] >= sent[partition]:
                unexpected.append(f"{value!r} at offset {offset}")
                continue
            seq = decoded[1]
            counts[seq] += 1
            where.setdefault(seq, offset)
            if seq < last_seq:
                backwards.append(f"seq {seq} at offset {offset} after seq {last_seq}")
            last_seq = max(last_seq, seq)
        acked_here = acked[partition] if partition < len(acked) else {}
        duplicates = [f"seq {s} x{n}" for s, n in sorted(counts.items()) if n > 1]
        missing = [f"seq {s} (acked at offset {o})" for s, o in sorted(acked_here.items()) if s not in counts]
        moved = [f"seq {s} acked at offset {o}, found at {where[s]}" for s, o in sorted(acked_here.items())
                 if s in where and o >= 0 and where[s] != o]
        lost = [f"offset {o}: consumed {v!r}, now {at_offset.get(o)!r}"
                for o, v in sorted(consumed[partition].items()) if at_offset.get(o) != v] \
            if partition < len(consumed) else []
        check.duplicates += sum(n - 1 for n in counts.values() if n > 1)
        check.missing += len(missing)
        check.out_of_order += len(backwards)
        check.unexpected += len(unexpected)
        check.moved += len(moved)
        check.consumed_then_lost += len(lost)
        check.unacked_present += sum(1 for s in counts if s not in acked_here)
        for what, found in (("acknowledged record(s) missing", missing), ("duplicate value(s)", duplicates),
                            ("record(s) out of sequence order", backwards), ("value(s) never sent", unexpected),
                            ("acknowledged record(s) at another offset", moved),
                            ("consumed record(s) gone from the log", lost)):
            if found:
                check.violations.append(f"p{partition}: {len(found)} {what}, e.g. {'; '.join(found[:MAX_EXAMPLES])}")
    return check
