"""The controller's side of topics, as Kafka 3.7's ZooKeeper-mode controller has it: topics created
(leaders elected for their partitions) and grown, and deleted (TopicDeletionManager: UpdateMetadata
with the deletion sentinel as leader, StopReplica with delete to every replica, the znodes removed
once every replica has answered without error; a replica on a dead broker is asked once it is back).
"""
from __future__ import annotations

import logging
from dataclasses import replace

from ..protocol.errors import ErrorCode
from .leader_election import NO_LEADER
from ..metadata.zk.paths import LeaderIsr

__all__ = ["TopicEvents"]

log = logging.getLogger(__name__)

DELETION_EPOCH = -2
TopicPartition = tuple[str, int]


class TopicEvents:
    """KafkaController's topic changes and deletions (a mixin: state and helpers are the controller's)."""

    # -- topics -------------------------------------------------------------------------------
    async def _on_topic_change(self) -> None:
        names = await self._zk(self.zk.get_all_topics)
        added = [n for n in names if n not in self.topics]
        removed = [n for n in self.topics if n not in names]
        for name in removed:
            self._forget_topic(name)
        if not added:
            return
        loaded = await self._load_topics(added)
        await self._elect_offline_and_new([(t, p) for t in loaded for p in self.topics[t].partitions])

    async def _on_partition_modification(self, topic: str) -> None:
        if topic not in self.topics:
            return
        found = await self._zk(self.zk.get_topic, topic)
        if found is None:
            return
        assignment, _ = found
        old = self.topics[topic]
        added = [p for p in assignment.partitions if p not in old.partitions]
        if not added:
            return
        if topic in self.deleting:
            log.warning("controller %d: topic %s is being deleted; ignoring its new partitions", self.node_id, topic)
            return
        self.topics[topic] = replace(assignment, topic_id=old.topic_id or assignment.topic_id)
        log.info("controller %d: topic %s grew to %d partitions", self.node_id, topic, len(assignment.partitions))
        await self._elect_offline_and_new([(topic, p) for p in added])

    async def _on_topic_deletion(self) -> None:
        pending = await self._zk(self.zk.get_topics_pending_deletion)
        for name in pending:
            if not self.delete_topic_enable:
                await self._zk(self.zk.delete_admin_path, f"/admin/delete_topics/{name}", self.epoch_zk_version)
                continue
            if name not in self.topics:
                if await self._zk(self.zk.get_topic, name) is None:
                    await self._zk(self.zk.delete_admin_path, f"/admin/delete_topics/{name}",
                                   self.epoch_zk_version)
                continue
            self.deleting.add(name)
            waiting = self.deletion_waiting.get(name)
            if waiting is not None:
                # started: ask again the replicas that have not answered, once their brokers are back
                dead = sorted({replica for _, replica in waiting if replica not in self.live})
                if dead:
                    log.info("controller %d: deletion of topic %s waits for brokers %s", self.node_id, name, dead)
                    continue
                batch = self._batch()
                for partition, replica in sorted(waiting):
                    batch.add_stop_replica(replica, name, partition, True, DELETION_EPOCH)
                self._send(batch)
                continue
            if self.reassigning_topic(name):
                log.info("controller %d: deletion of topic %s waits for its reassignments", self.node_id, name)
                continue
            assignment = self.topics[name]
            replicas = {r for rs in assignment.partitions.values() for r in rs}
            dead = sorted(r for r in replicas if r not in self.live)
            if dead:
                log.info("controller %d: deletion of topic %s waits for brokers %s", self.node_id, name, dead)
                continue
            keys = [(name, p) for p in assignment.partitions]
            batch = self._batch()
            entries = []
            for key in keys:
                state = self.states.get(key, (LeaderIsr(NO_LEADER, 0, [], self.epoch), 0))
                entries.append((self._info(*key), replace(state[0], leader=DELETION_EPOCH), state[1], []))
            batch.add_update_metadata(self.live, entries)
            for partition, rs in assignment.partitions.items():
                for replica in rs:
                    batch.add_stop_replica(replica, name, partition, True, DELETION_EPOCH)
            self.deletion_waiting[name] = {(p, r) for p, rs in assignment.partitions.items() for r in rs}
            self._send(batch)
            log.info("controller %d: deletion of topic %s started", self.node_id, name)

    async def _on_stop_replica_response(self, broker_id: int, response) -> None:
        """A topic is deleted (its znodes removed) once every replica has answered its StopReplica
        without error; a replica that fails, or whose broker dies first, is asked again later."""
        done = set()
        for result in response.partition_errors:
            waiting = self.deletion_waiting.get(result.topic_name)
            if waiting is None or (result.partition_index, broker_id) not in waiting:
                continue
            error = response.error_code or result.error_code
            if error:
                log.warning("controller %d: broker %d could not delete %s-%d (%s); retrying later", self.node_id,
                            broker_id, result.topic_name, result.partition_index, ErrorCode(error).name)
                continue
            waiting.discard((result.partition_index, broker_id))
            if not waiting:
                done.add(result.topic_name)
        for name in sorted(done):
            del self.deletion_waiting[name]
            await self._zk(self.zk.delete_topic_znodes, name, self.epoch_zk_version)
            self._forget_topic(name)
            log.info("controller %d: deleted topic %s", self.node_id, name)

    def _forget_topic(self, name: str) -> None:
        assignment = self.topics.pop(name, None)
        self.deleting.discard(name)
        self.deletion_waiting.pop(name, None)
        if assignment is not None:
            for partition in assignment.partitions:
                self.states.pop((name, partition), None)
