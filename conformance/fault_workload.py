"""The workload of the fault tests and the fault campaign, recorded for the history checker; no tests here.

Three clients run against a cluster while faults happen, all writing into one
kafkapy.testing.history.History:

- an idempotent acks=all producer (replication_workload.SequenceProducer) on `source`;
- a tailing consumer of `source` (read_uncommitted), whose reads must never be truncated later;
- the exactly-once consume-transform-produce application (transform_loop.py, a child process with
  a journal) from `source` to `sink`: read_committed, transactional, offsets in the transaction.

`finish()` stops them, reads both topics in full (source read_uncommitted, sink read_committed)
and runs the checker; it also checks the application's promise: every source record that the
application got to is in the sink exactly once, upper-cased.

    workload = FaultWorkload(cluster, tmp_path)
    workload.start()
    ...faults, workload.wait_progress()...
    report = workload.finish()
    assert report.ok, report.text()
"""
from __future__ import annotations

import logging
import time
import uuid
from collections import Counter
from pathlib import Path

import confluent_kafka
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from conformance.cluster_harness import ClusterUnreachable, wait_for_isr, wait_until
from conformance.replication_workload import (
    SequenceProducer,
    TailingConsumer,
    client_log,
    high_watermarks,
    read_topic,
)
from conformance.transform_loop import TransformLoopProcess
from kafkapy.devcluster.brokers import LocalCluster
from kafkapy.testing.history import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    History,
    HistoryReport,
    check,
)

__all__ = ["FAULT_OVERRIDES", "FaultWorkload"]

log = logging.getLogger(__name__)

# Broker settings of the fault tests: short timeouts, so that a fault shows within seconds.
FAULT_OVERRIDES = {
    "min.insync.replicas": "2",
    "default.replication.factor": "3",
    "unclean.leader.election.enable": "false",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
    "controlled.shutdown.retry.backoff.ms": "500",
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "5000",
    "group.initial.rebalance.delay.ms": "0",
}
PARTITIONS = 3


class FaultWorkload:
    """The three recorded clients of the module docstring, on two new topics of `cluster`."""

    def __init__(self, cluster: LocalCluster, work_dir: Path, rate: float = 100.0, max_restarts: int = 4) -> None:
        self.cluster = cluster
        tag = uuid.uuid4().hex[:8]
        self.source, self.sink = f"faults-in-{tag}", f"faults-out-{tag}"
        self.group, self.transactional_id = f"faults-app-{tag}", f"faults-txn-{tag}"
        self.history = History()
        self.journal = Path(work_dir) / f"transform-{tag}.jsonl"
        self.producer = SequenceProducer(cluster.bootstrap, self.source, PARTITIONS, rate=rate, history=self.history)
        self.tail = TailingConsumer(cluster.bootstrap, self.source, PARTITIONS, history=self.history)
        # A run that commits nothing for 30 s is killed and started again (transform_loop.py: the
        # librdkafka hang it works around); exactly-once must survive that too, and a CI test
        # should not wait a minute for it.
        self.app = TransformLoopProcess(cluster.bootstrap, self.group, self.source, self.sink, self.transactional_id,
                                        stall_s=30, max_restarts=max_restarts, journal=self.journal)
        self.exactly_once: list[str] = []

    def start(self, timeout: float = 90.0) -> None:
        """Create the topics, start the clients, and return once each has made progress."""
        admin = AdminClient({"bootstrap.servers": self.cluster.bootstrap, "socket.timeout.ms": 10000,
                             "logger": client_log})
        futures = admin.create_topics([NewTopic(t, PARTITIONS, 3) for t in (self.source, self.sink)],
                                      request_timeout=30)
        for future in futures.values():
            future.result(timeout=60)
        wait_for_isr(self.cluster, self.source, 3, timeout=60)
        wait_for_isr(self.cluster, self.sink, 3, timeout=60)
        self.producer.start()
        self.tail.start()
        self.app.start()
        wait_until(lambda: min(self.producer.acked_counts()) >= 20, timeout, message="first acknowledgements")
        wait_until(lambda: self.app.progress(0, 1 << 60), timeout, message="the application's first commit")

    def acked(self) -> int:
        return self.producer.acked_total()

    def wait_progress(self, timeout: float = 90.0, what: str = "") -> float:
        """Wait until every partition has new acknowledgements and the application commits again;
        returns how long that took."""
        began = time.monotonic()
        acked, committed = self.producer.acked_counts(), self.app.committed
        wait_until(lambda: all(n > b for n, b in zip(self.producer.acked_counts(), acked)), timeout, interval=0.1,
                   message=f"new acknowledgements on every partition {what}")
        wait_until(lambda: self.app.progress(committed, 1 << 60), max(5.0, timeout - (time.monotonic() - began)),
                   message=f"a new commit of the transform application {what}")
        if self.app.errors:  # progress() also says yes when the application gave up
            raise AssertionError(f"the transform application gave up {what}: {self.app.errors[-3:]}")
        return time.monotonic() - began

    def finish(self, catch_up_timeout: float = 120.0) -> HistoryReport:
        """Stop the clients (the application once it has processed everything acknowledged), read
        both topics in full and check the history."""
        self.producer.stop(flush_timeout=60.0)
        try:
            ends = high_watermarks(self.cluster.bootstrap, self.source, PARTITIONS)
            if not self.tail.wait_caught_up(ends, 60.0):
                self.history.note(f"the tailing consumer reached {self.tail.positions()}, not {ends}")
            wait_until(lambda: self._app_done(ends), catch_up_timeout, interval=1.0,
                       message=f"the transform application's committed offsets at the end of its input {ends}")
        finally:
            self.tail.stop()
            self.app.stop(30)
        self.history.load_journal(self.journal)
        try:
            wait_for_isr(self.cluster, self.source, 3, timeout=30)
        except (AssertionError, ClusterUnreachable) as exc:
            self.history.note(f"before the final read: {exc}")
        source = read_topic(self.cluster.bootstrap, self.source, PARTITIONS, 120.0, self.history, READ_UNCOMMITTED)
        sink = read_topic(self.cluster.bootstrap, self.sink, PARTITIONS, 120.0, self.history, READ_COMMITTED)
        report = check(self.history)
        self._check_exactly_once(source, sink, report)
        if self.app.errors:
            report.violations.append(f"the transform application gave up: {self.app.errors}")
        if self.producer.fatal_errors:
            report.violations.append(f"fatal idempotent-producer errors: {self.producer.fatal_errors[:3]}")
        if self.app.restarts:
            report.notes.append(f"the transform application was restarted: {self.app.restarts}")
        return report

    def _app_done(self, ends: list[int]) -> bool | list[str]:
        """The group's committed offsets are `ends` (or the application gave up). Counted from the
        group, not from the application's output: a run killed right after a commit never said so."""
        self.app.check()  # restarts a stalled run
        if self.app.errors:
            return self.app.errors
        consumer = confluent_kafka.Consumer({"bootstrap.servers": self.cluster.bootstrap, "group.id": self.group,
                                             "logger": client_log})
        try:
            committed = consumer.committed([TopicPartition(self.source, p) for p in range(PARTITIONS)], 10)
        except confluent_kafka.KafkaException:
            return False
        finally:
            consumer.close()
        return all(tp.offset >= end for tp, end in zip(committed, ends))

    def _check_exactly_once(self, source: list[list[tuple[int, bytes]]], sink: list[list[tuple[int, bytes]]],
                            report: HistoryReport) -> None:
        """Every source record in the sink exactly once (upper-cased): the application's promise."""
        wanted = Counter(value.upper() for partition in source for _, value in partition)
        got = Counter(value for partition in sink for _, value in partition)
        missing = sorted(set(wanted) - set(got))
        extra = sorted(set(got) - set(wanted))
        twice = sorted(v for v, n in got.items() if n > 1)
        for what, found in (("source record(s) never transformed", missing), ("sink record(s) without a source",
                                                                                extra),
                            ("source record(s) transformed twice", twice)):
            if found:
                report.violations.append(f"exactly-once: {len(found)} {what}, e.g. {found[:3]}")
