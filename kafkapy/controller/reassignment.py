"""Partition reassignment, as Kafka 3.7's ZooKeeper-mode controller does it (KafkaController.scala's
onPartitionReassignment; docs/cluster.md, "Operations").

A reassignment moves a partition from its original replicas (ORS) to target replicas (TRS). The
controller writes RS = TRS + ORS (target first), AR = TRS - ORS (adding) and RR = ORS - TRS
(removing) into the topic znode, bumps the leader epoch and sends LeaderAndIsr to every replica in
RS, the adding ones as new replicas. They fetch from the leader until the leader adds them to the
ISR. Once TRS is a subset of the ISR the reassignment completes: the leader moves into TRS if it
is not there, the removed replicas leave the ISR and are stopped with their logs deleted, and the
topic znode is rewritten with RS = TRS and no adding/removing replicas.

Reassignments come from AlterPartitionReassignments (a null target cancels: back to ORS) or the
legacy `/admin/reassign_partitions` znode; the latest request for a partition wins. They survive
controller failover (the adding/removing lists live in the topic znodes) and resume when a broker
holding one of their replicas comes back. Completion is checked after every ISR change the
controller accepts. A topic being reassigned is not deleted until its reassignments finish.

`ReplicaAssignment` and `validate_target` are pure; `Reassignments` is a mixin of KafkaController
whose `_`-prefixed coroutines run inside the controller's event task.
"""
from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, replace

from ..protocol.errors import ErrorCode
from .broker_requests import NotController
from .leader_election import remove_replicas_from_isr
from ..metadata.zk.paths import LeaderIsr

__all__ = ["ReplicaAssignment", "Reassignments", "replication_factor_change", "validate_target"]

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
# What a reassignment request answers per partition: (error code, message).
Outcome = tuple[int, "str | None"]


@dataclass(frozen=True, slots=True)
class ReplicaAssignment:
    """A partition's replicas with the reassignment in flight, as the topic znode holds them."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def origin(self) -> tuple[int, ...]:
        """The replicas before the reassignment (ORS)."""
        return tuple(r for r in self.replicas if r not in self.adding)

    @property
    def target(self) -> tuple[int, ...]:
        """The replicas after it (TRS)."""
        return tuple(r for r in self.replicas if r not in self.removing)

    @property
    def being_reassigned(self) -> bool:
        return bool(self.adding or self.removing)

    def reassign_to(self, target: Sequence[int]) -> ReplicaAssignment:
        """RS = target + origin (target first, no duplicates), AR = RS - origin, RR = RS - target."""
        origin = self.origin
        full = tuple(dict.fromkeys((*target, *origin)))
        return ReplicaAssignment(full, tuple(r for r in full if r not in origin),
                                 tuple(r for r in full if r not in target))


def validate_target(target: Sequence[int], current: ReplicaAssignment, live: Collection[int]) -> Outcome | None:
    """Kafka's checks of a requested replica list; None when it is acceptable."""
    if not target:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Empty replica list specified in partition reassignment."
    if len(set(target)) != len(target):
        return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Duplicate replica ids in partition reassignment replica list: {list(target)}")
    if any(r < 0 for r in target):
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Invalid broker id in replica list: {list(target)}"
    adding = current.reassign_to(target).adding
    if not set(adding) <= set(live):
        return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Replica assignment has brokers that are not alive. Replica list: {list(adding)}, "
                f"live broker list: {sorted(live)}")
    return None


def replication_factor_change(target: Sequence[int], current: ReplicaAssignment) -> Outcome | None:
    """AlterPartitionReassignments v1 with AllowReplicationFactorChange false (KIP-860): the refusal
    of a target whose size differs from the partition's replication factor, as Kafka 4.4's
    controller words it; None when the size is unchanged. During a reassignment the factor is the
    one it is heading for (replicas and adding ones, less the removing ones)."""
    factor = len((set(current.replicas) | set(current.adding)) - set(current.removing)) \
        if current.being_reassigned else len(current.replicas)
    if factor == len(target):
        return None
    return ErrorCode.INVALID_REPLICATION_FACTOR, f"The replication factor is changed from {factor} to {len(target)}"


class Reassignments:
    """KafkaController's reassignment handling (a mixin: state and helpers are the controller's)."""

    # -- requests -----------------------------------------------------------------------------
    async def alter_partition_reassignments(
            self, targets: dict[TopicPartition, list[int] | None],
            allow_replication_factor_change: bool = True) -> dict[TopicPartition, Outcome] | None:
        """AlterPartitionReassignments: per partition (error code, message); None when this broker is
        not the controller (the request's top-level NOT_CONTROLLER)."""
        try:
            return await self.call("alter_reassignments", (targets, allow_replication_factor_change))
        except NotController:
            return None

    async def list_partition_reassignments(
            self, wanted: Iterable[TopicPartition] | None) -> dict[TopicPartition, ReplicaAssignment] | None:
        """ListPartitionReassignments: the ongoing ones among `wanted` (all when None); None when
        this broker is not the controller."""
        try:
            return await self.call("list_reassignments", wanted)
        except NotController:
            return None

    async def _alter_reassignments(
            self, targets: dict[TopicPartition, list[int] | None],
            allow_replication_factor_change: bool = True) -> dict[TopicPartition, Outcome] | None:
        if not self.active:
            return None
        results: dict[TopicPartition, Outcome] = {}
        to_start: dict[TopicPartition, ReplicaAssignment] = {}
        live = self._live_ids()
        for key, target in targets.items():
            current = self._assignment(key)
            if target is not None:
                invalid = validate_target(target, current, live)
                if invalid is None and not allow_replication_factor_change:
                    invalid = replication_factor_change(target, current)
                if invalid is not None:
                    results[key] = invalid
                    continue
            built = self._build_reassignment(current, target)
            if built is None:
                results[key] = (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                                f"No reassignment is in progress for partition {key[0]}-{key[1]}")
                continue
            to_start[key] = built
        # the latest reassignment of a partition wins over one from the legacy znode
        await self._remove_from_zk_reassignment(lambda key, _replicas: key in to_start)
        results.update(await self._trigger_reassignments(to_start))
        return results

    async def _list_reassignments(
            self, wanted: Iterable[TopicPartition] | None) -> dict[TopicPartition, ReplicaAssignment] | None:
        if not self.active:
            return None
        keys = self._reassigning_partitions() if wanted is None else list(wanted)
        ongoing = {}
        for key in keys:
            if key[0] in self.topics:
                assignment = self._assignment(key)
                if assignment.being_reassigned:
                    ongoing[key] = assignment
        return ongoing

    async def _on_zk_reassignment(self) -> None:
        """/admin/reassign_partitions appeared or changed: start what it asks for."""
        targets = await self._zk(self.zk.get_reassignment)
        if not targets:
            return
        to_start: dict[TopicPartition, ReplicaAssignment] = {}
        for key, target in targets.items():
            current = self._assignment(key)
            if list(current.target) == list(target) and current.being_reassigned:
                continue  # already running (our own rewrite of the znode, or a failover resume)
            to_start[key] = current.reassign_to(target)
        failed = {key: outcome for key, outcome in (await self._trigger_reassignments(to_start)).items() if outcome[0]}
        if failed:
            log.warning("controller %d: reassignments from %s failed: %s", self.node_id, "/admin/reassign_partitions",
                        {f"{t}-{p}": ErrorCode(code).name for (t, p), (code, _) in failed.items()})
            await self._remove_from_zk_reassignment(lambda key, _replicas: key in failed)

    async def _resume_reassignments(self, only_on: Collection[int] | None = None) -> None:
        """After failover (every ongoing reassignment), or when brokers start (those with a replica
        on them): send the reassignment's requests again and complete what can be completed."""
        from_zk = await self._zk(self.zk.get_reassignment) if only_on is None else None
        ongoing: dict[TopicPartition, ReplicaAssignment] = {}
        for key in self._reassigning_partitions():
            assignment = self._assignment(key)
            if only_on is None or any(r in only_on for r in assignment.replicas):
                ongoing[key] = assignment
        for key, target in (from_zk or {}).items():  # the znode's targets take precedence
            if key[0] in self.topics and key[1] in self.topics[key[0]].partitions:
                ongoing[key] = self._assignment(key).reassign_to(target)
        if ongoing:
            log.info("controller %d: resuming %d reassignment(s)", self.node_id, len(ongoing))
            await self._trigger_reassignments(ongoing)

    # -- the steps ----------------------------------------------------------------------------
    def _assignment(self, key: TopicPartition) -> ReplicaAssignment:
        topic = self.topics.get(key[0])
        if topic is None:
            return ReplicaAssignment(())
        return ReplicaAssignment(tuple(topic.partitions.get(key[1], ())), tuple(topic.adding.get(key[1], ())),
                                 tuple(topic.removing.get(key[1], ())))

    def _set_assignment(self, key: TopicPartition, assignment: ReplicaAssignment) -> None:
        """Record a partition's assignment in memory (the topic znode is written separately)."""
        topic = self.topics[key[0]]
        partitions = dict(topic.partitions)
        adding = {p: r for p, r in topic.adding.items() if p != key[1]}
        removing = {p: r for p, r in topic.removing.items() if p != key[1]}
        partitions[key[1]] = list(assignment.replicas)
        if assignment.adding:
            adding[key[1]] = list(assignment.adding)
        if assignment.removing:
            removing[key[1]] = list(assignment.removing)
        self.topics[key[0]] = replace(topic, partitions=partitions, adding=adding, removing=removing)

    async def _write_assignment(self, topic: str) -> None:
        await self._zk(self.zk.set_topic_assignment, self.topics[topic], self.epoch_zk_version)

    def _reassigning_partitions(self) -> list[TopicPartition]:
        return [(name, p) for name, topic in self.topics.items()
                for p in sorted(set(topic.adding) | set(topic.removing))]

    def reassigning_topic(self, name: str) -> bool:
        topic = self.topics.get(name)
        return topic is not None and bool(topic.adding or topic.removing)

    @staticmethod
    def _build_reassignment(current: ReplicaAssignment, target: Sequence[int] | None) -> ReplicaAssignment | None:
        """The assignment a request asks for; a null target cancels an ongoing reassignment (back to
        the original replicas) and is None when there is none."""
        if current.being_reassigned:
            return current.reassign_to(current.origin if target is None else target)
        if target is None:
            return None
        return current.reassign_to(target)

    async def _trigger_reassignments(
            self, reassignments: dict[TopicPartition, ReplicaAssignment]) -> dict[TopicPartition, Outcome]:
        results: dict[TopicPartition, Outcome] = {}
        for key, assignment in reassignments.items():
            if key[0] in self.deleting:
                log.info("controller %d: not reassigning %s-%d: the topic is being deleted", self.node_id, *key)
                results[key] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
                continue
            if not self._assignment(key).replicas or key not in self.states:
                results[key] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
                continue
            await self._on_partition_reassignment(key, assignment)
            results[key] = (ErrorCode.NONE, None)
        return results

    def _reassignment_complete(self, key: TopicPartition, assignment: ReplicaAssignment) -> bool:
        if not assignment.being_reassigned:
            return True
        state = self.states.get(key)
        return state is not None and set(assignment.target) <= set(state[0].isr)

    async def _on_partition_reassignment(self, key: TopicPartition, assignment: ReplicaAssignment) -> None:
        """Kafka's onPartitionReassignment: start the reassignment (A) or complete it (B)."""
        current = self._assignment(key)
        if current != assignment:  # U1, U2: the new RS/AR/RR, in ZooKeeper and in memory
            self._set_assignment(key, assignment)
            await self._write_assignment(key[0])
            log.info("partition %s-%d: reassigning from %s to %s (replicas %s, adding %s, removing %s)", key[0],
                     key[1], list(assignment.origin), list(assignment.target), list(assignment.replicas),
                     list(assignment.adding), list(assignment.removing))
            unneeded = [r for r in current.replicas if r not in assignment.replicas]
            if unneeded:  # adding replicas of an earlier reassignment that the new one drops
                await self._stop_removed_replicas(key, unneeded)
        if not self._reassignment_complete(key, assignment):
            # A1, A2: a new leader epoch with the full replica set, the adding replicas as new ones
            state = self.states[key][0]
            await self._apply({key: replace(state, leader_epoch=state.leader_epoch + 1, controller_epoch=self.epoch)},
                              new_replicas=assignment.adding)
            return
        target = assignment.target
        # B2: RS = TRS in memory; B3: the leader moves into TRS (or the epoch goes up), LeaderAndIsr to TRS
        self._set_assignment(key, ReplicaAssignment(target))
        if not await self._move_leader_into(key, target):
            # nobody in TRS can lead now: keep the reassignment going and try again later
            self._set_assignment(key, assignment)
            log.warning("partition %s-%d: no live in-sync replica of %s can lead; the reassignment waits", key[0],
                        key[1], list(target))
            return
        # B4, B5: the removed replicas leave the ISR, stop and delete their logs
        if assignment.removing:
            await self._stop_removed_replicas(key, list(assignment.removing))
        # B6: RS = TRS, AR = RR = [] in ZooKeeper; B7: out of the legacy znode; B8: metadata to all
        await self._write_assignment(key[0])
        await self._remove_from_zk_reassignment(lambda k, replicas: k == key and list(replicas) == list(target))
        batch = self._batch()
        batch.add_update_metadata(self.live, self._metadata_entries([key]))
        self._send(batch)
        log.info("partition %s-%d: reassignment to %s completed", key[0], key[1], list(target))
        if key[0] in self.deleting and not self.reassigning_topic(key[0]):
            self.post("topic_deletion")

    async def _move_leader_into(self, key: TopicPartition, target: Sequence[int]) -> bool:
        """Kafka's moveReassignedPartitionLeaderIfRequired; False when no target replica can lead."""
        state = self.states[key][0]
        live = self._live_ids()
        if state.leader in target and state.leader in live:
            new_state = replace(state, leader_epoch=state.leader_epoch + 1, controller_epoch=self.epoch)
        else:
            leader = next((r for r in target if r in live and r in state.isr), None)
            if leader is None:
                return False
            new_state = LeaderIsr(leader, state.leader_epoch + 1, list(state.isr), self.epoch,
                                  state.leader_recovery_state)
        return bool(await self._apply({key: new_state}))

    async def _stop_removed_replicas(self, key: TopicPartition, removed: Sequence[int]) -> None:
        """OfflineReplica then deletion for replicas leaving a partition: out of the ISR (the epoch
        goes up, LeaderAndIsr to the remaining replicas), then StopReplica with delete."""
        state = self.states.get(key)
        if state is not None:
            shrunk = remove_replicas_from_isr(state[0], set(removed), self.epoch)
            if shrunk is not None:
                await self._apply({key: shrunk})
        epoch = self.states[key][0].leader_epoch if key in self.states else -1
        batch = self._batch()
        for replica in removed:
            batch.add_stop_replica(replica, key[0], key[1], True, epoch)
        self._send(batch)
        offline = [r for r in removed if r not in self.live]
        if offline:
            log.warning("partition %s-%d: replicas on brokers %s that are down keep their data until they are "
                        "removed by hand", key[0], key[1], offline)

    async def _maybe_complete_reassignments(self, keys: Iterable[TopicPartition]) -> None:
        """After ISR changes: complete the reassignments whose targets are all in sync now."""
        for key in keys:
            assignment = self._assignment(key)
            if assignment.being_reassigned and self._reassignment_complete(key, assignment):
                await self._on_partition_reassignment(key, assignment)

    async def _remove_from_zk_reassignment(self, should_remove) -> None:
        """Drop entries from /admin/reassign_partitions (deleting it when none are left)."""
        targets = await self._zk(self.zk.get_reassignment)
        if targets is None:
            return
        left = {key: replicas for key, replicas in targets.items() if not should_remove(key, replicas)}
        if len(left) != len(targets):
            await self._zk(self.zk.set_or_delete_reassignment, left, self.epoch_zk_version)
