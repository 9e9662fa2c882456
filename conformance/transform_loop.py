"""An exactly-once consume-transform-produce application (confluent-kafka) for the cluster tests;
no tests here.

The application upper-cases every input value: a read_committed consumer, a transactional
producer, and the consumer's offsets sent to each transaction. It runs in its own process, as an
application would, and prints one line per committed transaction (`committed N`, N records) or
`error <repr>` when it gives up:

    python conformance/transform_loop.py --bootstrap H:P --group G --source IN --sink OUT \\
        --transactional-id T

`TransformLoopProcess` runs it for a test and restarts it when it stops making progress: a test
thread blocked inside librdkafka would also block the test itself (confluent-kafka holds the
GIL in its rebalance callback while it waits for librdkafka's main thread). librdkafka 2.16 can
deadlock that way when a broker leaves the metadata while an OffsetForLeaderEpoch request is in
flight (a lock-order inversion between its handle lock and a partition lock; librdkafka issue
#5476). A restart is what an operator would do, and exactly-once must survive it: the new
producer fences the old one and the new consumer resumes from the committed offsets.
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def run(bootstrap: str, group: str, source: str, sink: str, transactional_id: str) -> None:
    import confluent_kafka

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "isolation.level": "read_committed", "session.timeout.ms": 10000})
    # librdkafka (2.10+) drops the handle of a broker missing from a metadata response (the killed
    # coordinator, while it is down), but a TxnOffsetCommit may still wait for that handle to come
    # up as the cached group coordinator, and it only looks again on a broker state change: past
    # send_offsets_to_transaction's timeout, against Apache Kafka as much as kafkapy. Connecting
    # to every broker (no sparse connections) and refreshing metadata every few seconds makes the
    # restarted broker's new handle connect, and that state change sends the request on.
    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap, "transactional.id": transactional_id,
        "transaction.timeout.ms": 30000, "enable.sparse.connections": False,
        "topic.metadata.refresh.interval.ms": 3000})
    try:
        producer.init_transactions(60)
        consumer.subscribe([source])
        while not stop.is_set():
            batch = [m for m in consumer.consume(200, 0.5) if m.error() is None]
            if not batch:
                continue
            try:
                producer.begin_transaction()
                for msg in batch:
                    producer.produce(sink, key=msg.key(), value=msg.value().upper(), partition=msg.partition())
                offsets = consumer.position(consumer.assignment())
                producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 60)
                _commit(producer)
                print(f"committed {len(batch)}", flush=True)
            except confluent_kafka.KafkaException as exc:
                if not exc.args[0].txn_requires_abort():
                    raise
                producer.abort_transaction(60)
                # rewind to the committed offsets: the aborted batch is read again
                committed = consumer.committed(consumer.assignment(), 30)
                for tp in committed:
                    consumer.seek(tp if tp.offset >= 0 else confluent_kafka.TopicPartition(
                        tp.topic, tp.partition, confluent_kafka.OFFSET_BEGINNING))
    except Exception as exc:  # reported to the test
        print(f"error {exc!r}", flush=True)
    finally:
        consumer.close()


def _commit(producer) -> None:
    """commit_transaction, retried while librdkafka says the error is retriable (its contract)."""
    import confluent_kafka

    for attempt in range(5):
        try:
            producer.commit_transaction(30)
            return
        except confluent_kafka.KafkaException as exc:
            if not exc.args[0].retriable() or attempt == 4:
                raise


class TransformLoopProcess:
    """Runs the application for a test: `committed` counts records of committed transactions (over
    all runs), `errors` what a run gave up with. A run that commits nothing for `stall_s` while
    input is left is killed (SIGKILL) and started again, at most `max_restarts` times; `restarts`
    says why each happened. `stop()` ends the current run."""

    def __init__(self, bootstrap: str, group: str, source: str, sink: str, transactional_id: str,
                 stall_s: float = 45, max_restarts: int = 3):
        self.argv = [sys.executable, str(Path(__file__).resolve()), "--bootstrap", bootstrap, "--group", group,
                     "--source", source, "--sink", sink, "--transactional-id", transactional_id]
        self.stall_s, self.max_restarts = stall_s, max_restarts
        self.committed = 0
        self.errors: list[str] = []
        self.restarts: list[str] = []
        self._last_progress = time.monotonic()
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        self._last_progress = time.monotonic()
        proc = self._proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT,
                                             start_new_session=True)
        threading.Thread(target=self._read, args=(proc,), daemon=True).start()

    def _read(self, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            kind, _, value = line.strip().partition(" ")
            with self._lock:
                if kind == "committed":
                    self.committed += int(value)
                    self._last_progress = time.monotonic()
                elif kind == "error":
                    self.errors.append(value)

    def check(self, done: bool = False) -> None:
        """Restart a stalled run (call while waiting for progress)."""
        if done or self._proc is None or time.monotonic() - self._last_progress < self.stall_s:
            return
        if len(self.restarts) >= self.max_restarts:
            self.errors.append(f"no progress for {self.stall_s:g} s after {len(self.restarts)} restarts")
            return
        self.restarts.append(f"no commit for {self.stall_s:g} s after {self.committed} records")
        print(f"transform loop: {self.restarts[-1]}; killing and restarting it", file=sys.stderr)
        self._kill()
        self.start()

    def progress(self, before: int, target: int) -> bool | list[str]:
        """For wait_until: more than `before` records committed, or `target` reached, or errors."""
        self.check(done=self.committed >= target)
        return self.committed > before or self.committed >= target or self.errors

    def stop(self, timeout: float = 60) -> None:
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self._kill()

    def _kill(self) -> None:
        proc = self._proc
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in ("bootstrap", "group", "source", "sink", "transactional-id"):
        parser.add_argument(f"--{name}", required=True)
    args = parser.parse_args()
    run(args.bootstrap, args.group, args.source, args.sink, args.transactional_id)
