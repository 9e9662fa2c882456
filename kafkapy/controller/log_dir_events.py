"""The controller's side of log directory failures, as Kafka's ZooKeeper-mode controller has it.

A broker whose log dir fails writes `/log_dir_event_notification/log_dir_event_<seq>` (kafkapy's
brokers also when a full dir takes writes again). The controller reads and deletes the events, and
sends that broker LeaderAndIsr with the current state of every partition it holds a replica of
(Kafka's onBrokerLogDirFailure). The broker answers KAFKA_STORAGE_ERROR for each replica in a
failed (or full) dir: those replicas are offline (Kafka's replicasOnOfflineDirs). A partition led
by an offline replica gets a new leader among the live, in-sync replicas on healthy dirs; an
offline follower leaves the ISR; UpdateMetadata lists them as offline replicas. A replica that
answers without that error again (its dir is back) is online: it has taken the LeaderAndIsr, so it
follows the leader, catches up and rejoins the ISR through the leader's AlterPartition.
"""
from __future__ import annotations

import logging
from typing import Any

from ..protocol.errors import ErrorCode
from .leader_election import offline_election, remove_replicas_from_isr

__all__ = ["LogDirEvents"]

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


class LogDirEvents:
    """KafkaController's log dir failure handling (a mixin: state and helpers are the controller's)."""

    offline_replicas: dict[int, set[TopicPartition]]

    def _replica_online(self, broker_id: int, key: TopicPartition) -> bool:
        return key not in self.offline_replicas.get(broker_id, ())

    async def _on_log_dir_event(self) -> None:
        brokers = sorted(b for b in await self._zk(self.zk.take_log_dir_events) if b in self.live)
        if not brokers:
            return
        log.info("controller %d: log dir event from broker(s) %s; asking them for the state of their replicas",
                 self.node_id, brokers)
        batch = self._batch()
        for key, (state, version) in self.states.items():
            if key[0] in self.deleting or key[0] not in self.topics:
                continue
            info = self._info(*key)
            targets = [b for b in brokers if b in info.replicas]
            if targets:
                batch.add_leader_and_isr(targets, info, state, version)
        self._send(batch)

    def _leader_and_isr_outcome(self, broker_id: int, response: Any) -> None:
        """LeaderAndIsr answered (channel callback): worth an event only when it changes which
        replicas of the broker are offline."""
        if response.error_code:
            return
        failed = any(p.error_code == ErrorCode.KAFKA_STORAGE_ERROR for p in _partition_errors(response))
        if failed or self.offline_replicas.get(broker_id):
            self.post("leader_and_isr_response", (broker_id, response))

    async def _on_leader_and_isr_outcome(self, broker_id: int, response: Any) -> None:
        by_id = {a.topic_id: name for name, a in self.topics.items() if a.topic_id is not None}
        failed: set[TopicPartition] = set()
        answered: set[TopicPartition] = set()
        for part in _partition_errors(response):
            name = getattr(part, "topic_name", None) or by_id.get(getattr(part, "_topic_id", None))
            if name is None:
                continue
            key = (name, part.partition_index)
            (failed if part.error_code == ErrorCode.KAFKA_STORAGE_ERROR else answered).add(key)
        previous = self.offline_replicas.get(broker_id, set())
        current = (previous - answered) | failed
        if current:
            self.offline_replicas[broker_id] = current
        else:
            self.offline_replicas.pop(broker_id, None)
        gone = current - previous
        back = previous - current
        if back:
            log.info("controller %d: replicas of broker %d are online again: %s", self.node_id, broker_id,
                     sorted(back))
            batch = self._batch()
            batch.add_update_metadata(self.live, self._metadata_entries(back))
            self._send(batch)
        if gone:
            log.warning("controller %d: replicas of broker %d are on a failed log dir: %s", self.node_id,
                        broker_id, sorted(gone))
            await self._on_replicas_offline(broker_id, gone)

    async def _on_replicas_offline(self, broker_id: int, keys: set[TopicPartition]) -> None:
        """Kafka's onReplicasBecomeOffline: new leaders for what the broker led there, and the
        offline replicas out of the ISR."""
        changes = {}
        for key in sorted(keys):
            if key not in self.states or key[0] in self.deleting or key[0] not in self.topics:
                continue
            state = self.states[key][0]
            info = self._info(*key)
            eligible = {b for b in self._live_ids() if self._replica_online(b, key)}
            if state.leader == broker_id:
                elected = offline_election(state, info.replicas, eligible, self.unclean_leader_election(key[0]),
                                           self.epoch)
                if elected is None:
                    log.warning("partition %s-%d: no in-sync replica on a healthy log dir (ISR %s); it is "
                                "offline", key[0], key[1], state.isr)
                    elected = remove_replicas_from_isr(state, {broker_id}, self.epoch)
            else:
                elected = remove_replicas_from_isr(state, {broker_id}, self.epoch)
            if elected is not None:
                changes[key] = elected
        await self._apply(changes)


def _partition_errors(response: Any) -> list[_PartitionError]:
    """A LeaderAndIsr response's partition errors, v0-4 (flat, named) or v5+ (per topic id)."""
    topics = getattr(response, "topics", None)
    if not topics:
        return [_PartitionError(p, None) for p in getattr(response, "partition_errors", None) or []]
    return [_PartitionError(p, topic.topic_id) for topic in topics for p in topic.partition_errors]


class _PartitionError:
    __slots__ = ("partition_index", "error_code", "topic_name", "_topic_id")

    def __init__(self, part: Any, topic_id: Any):
        self.partition_index = part.partition_index
        self.error_code = part.error_code
        self.topic_name = getattr(part, "topic_name", None)
        self._topic_id = topic_id
