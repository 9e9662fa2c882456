"""A transaction coordinator over real partition logs, a manual clock and a local marker writer."""
from __future__ import annotations

import itertools
from pathlib import Path

from kafkapy.groupcoord import OffsetsTopicStore
from kafkapy.log import PartitionLog
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.protocol.records import build_batch
from kafkapy.txncoord import TRANSACTION_STATE_TOPIC, TransactionCoordinator, TransactionCoordinatorConfig
from tests.groupcoord.fakes import ManualScheduler

STATE_PARTITIONS = 3


class TxnHarness:
    def __init__(self, path: Path, scheduler: ManualScheduler | None = None, **config):
        self.path = path
        self.sched = scheduler or ManualScheduler(start_ms=1_700_000_000_000)
        defaults = dict(transaction_state_log_num_partitions=STATE_PARTITIONS)
        defaults.update(config)
        self.config = TransactionCoordinatorConfig(**defaults)
        self.logs: dict[tuple[str, int], PartitionLog] = {}
        self.pids = itertools.count(1000)
        self.marker_failures: dict[tuple[str, int], int] = {}  # partition -> error to answer
        self.markers: list[tuple[int, int, int, bool, tuple[str, int]]] = []
        self.coord = self._coordinator()

    def log(self, topic: str, partition: int) -> PartitionLog:
        key = (topic, partition)
        if key not in self.logs:
            self.logs[key] = PartitionLog.open(self.path / f"{topic}-{partition}")
        return self.logs[key]

    def _coordinator(self) -> TransactionCoordinator:
        store = OffsetsTopicStore(lambda p: self.log(TRANSACTION_STATE_TOPIC, p), topic=TRANSACTION_STATE_TOPIC)
        coord = TransactionCoordinator(
            self.config, store, lambda: next(self.pids), self.write_markers, node_id=0,
            state_topic_leaders=lambda create: [0] * STATE_PARTITIONS, clock_ms=self.sched.clock_ms)
        coord.start(self.sched)
        return coord

    def write_markers(self, pid: int, epoch: int, coordinator_epoch: int, commit: bool, partitions):
        results = {}
        for tp in partitions:
            failure = self.marker_failures.get(tp)
            if failure is not None:
                results[tp] = failure
                continue
            try:
                self.log(*tp).append_txn_marker(pid, epoch, coordinator_epoch, commit)
                results[tp] = ErrorCode.NONE
                self.markers.append((pid, epoch, coordinator_epoch, commit, tp))
            except KafkaError as exc:
                results[tp] = exc.code
        return results

    def produce(self, tp: tuple[str, int], pid: int, epoch: int, seq: int = 0) -> None:
        batch = bytearray(build_batch([(b"k", b"v", (), self.sched.now_ms)], base_timestamp=self.sched.now_ms,
                                      producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                      is_transactional=True))
        self.log(*tp).append(batch)

    def metadata(self, transactional_id: str):
        return self.coord.state.get(transactional_id)[2]

    def restart(self, clean: bool = True) -> None:
        """Close the coordinator and every log, reopen them, and load a new coordinator."""
        self.coord.close()
        for plog in self.logs.values():
            if clean:
                plog.close()
            else:
                plog.abandon()
        self.logs.clear()
        self.coord = self._coordinator()

    def close(self) -> None:
        self.coord.close()
        for plog in self.logs.values():
            plog.close()
