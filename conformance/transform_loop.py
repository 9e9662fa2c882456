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


def run(bootstrap: str, group: str, source: str, sink: str, transactional_id: str,
        journal_path: str | None = None) -> None:
    import confluent_kafka

    from kafkapy.testing.history import ABORTED, COMMITTED, READ_COMMITTED, TXN_HEADER, Journal

    # With a journal, every read, send, transaction and committed offset is written down for the
    # test's history checker (kafkapy.testing.history); transactions are named <id>.<pid>.<n>
    # and each record carries its transaction's name in a header.
    journal = Journal(journal_path) if journal_path else None
    me = f"transform-{os.getpid()}"
    txn_count = 0

    def on_delivery(err, msg, txn: str) -> None:
        # the transaction comes with the callback: delivery reports do not carry the headers
        if journal is None:
            return
        if err is not None:
            journal.failed(me, sink, msg.partition(), msg.value(), err.name(), txn=txn)
        else:
            journal.acked(me, sink, msg.partition(), msg.value(), msg.offset(), txn=txn)

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
            txn_count += 1
            txn = f"{transactional_id}.{os.getpid()}.{txn_count}"
            if journal is not None:
                for msg in batch:
                    journal.read(me, source, msg.partition(), msg.offset(), msg.value(), msg.key(),
                                 READ_COMMITTED)
            try:
                producer.begin_transaction()
                if journal is not None:
                    journal.begin_transaction(txn)
                for msg in batch:
                    value = msg.value().upper()
                    if journal is not None:
                        journal.sent(me, sink, msg.partition(), value, msg.key(), txn=txn)
                    producer.produce(sink, key=msg.key(), value=value, partition=msg.partition(),
                                     headers=[(TXN_HEADER, txn.encode())],
                                     on_delivery=lambda err, m, txn=txn: on_delivery(err, m, txn))
                offsets = consumer.position(consumer.assignment())
                producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 60)
                if journal is not None:
                    journal.committing(txn)
                _commit(producer)
                if journal is not None:
                    journal.end_transaction(txn, COMMITTED)
                    for tp in offsets:
                        if tp.offset >= 0:
                            journal.committed_offset(group, tp.topic, tp.partition, tp.offset)
                print(f"committed {len(batch)}", flush=True)
            except confluent_kafka.KafkaException as exc:
                # produce() answers _STATE once the transaction has failed with an abortable error
                # (e.g. INVALID_TXN_STATE from a partition leader), without the abort flag: the
                # transaction must be aborted all the same. A fatal error makes the abort raise.
                error = exc.args[0]
                if not (error.txn_requires_abort() or error.code() == confluent_kafka.KafkaError._STATE):
                    raise
                producer.abort_transaction(60)
                if journal is not None:
                    journal.end_transaction(txn, ABORTED)
                # rewind to the committed offsets: the aborted batch is read again
                committed = _committed(consumer)
                for tp in committed:
                    consumer.seek(tp if tp.offset >= 0 else confluent_kafka.TopicPartition(
                        tp.topic, tp.partition, confluent_kafka.OFFSET_BEGINNING))
    except Exception as exc:  # reported to the test
        print(f"error {exc!r}", flush=True)
    finally:
        consumer.close()


def _committed(consumer) -> list:
    """The group's committed offsets, retried while the error is retriable: NOT_COORDINATOR and
    COORDINATOR_LOAD_IN_PROGRESS while the group coordinator moves (a broker killed, paused or cut
    off) are Kafka's normal answers, and an application asks again."""
    import confluent_kafka

    for attempt in range(10):
        try:
            return consumer.committed(consumer.assignment(), 30)
        except confluent_kafka.KafkaException as exc:
            error = exc.args[0]
            transient = error.retriable() or error.code() in (
                confluent_kafka.KafkaError.NOT_COORDINATOR, confluent_kafka.KafkaError.COORDINATOR_NOT_AVAILABLE,
                confluent_kafka.KafkaError.COORDINATOR_LOAD_IN_PROGRESS, confluent_kafka.KafkaError.REQUEST_TIMED_OUT,
                confluent_kafka.KafkaError._TIMED_OUT, confluent_kafka.KafkaError._TRANSPORT)
            if not transient or attempt == 9:
                raise
            time.sleep(1.0)
    return []


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
                 stall_s: float = 45, max_restarts: int = 3, journal: str | os.PathLike | None = None):
        self.argv = [sys.executable, str(Path(__file__).resolve()), "--bootstrap", bootstrap, "--group", group,
                     "--source", source, "--sink", sink, "--transactional-id", transactional_id]
        if journal is not None:  # every run appends to it; History.load_journal reads it back
            self.argv += ["--journal", str(journal)]
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
    parser.add_argument("--journal", default=None, help="write a history journal (kafkapy.testing.history) here")
    args = parser.parse_args()
    run(args.bootstrap, args.group, args.source, args.sink, args.transactional_id, args.journal)
