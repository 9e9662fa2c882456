"""Kafka's ZooKeeper-mode leader election strategies, as pure functions over one partition.

"Live" means registered and not shutting down. Each function returns the partition's next
`LeaderIsr` (leader epoch bumped) or None when no replica can lead; the controller writes the
result to the partition's state znode with compare-and-set.
"""
from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace

from ..metadata.zk.paths import LeaderIsr

__all__ = ["NO_LEADER", "RECOVERING", "new_partition_state", "offline_election", "preferred_election",
           "controlled_shutdown_election", "remove_replicas_from_isr"]

NO_LEADER = -1
RECOVERED = 0
RECOVERING = 1


def new_partition_state(replicas: Sequence[int], live: Collection[int], controller_epoch: int) -> LeaderIsr | None:
    """A new partition: the first live replica leads, the live replicas are the ISR, epoch 0."""
    isr = [r for r in replicas if r in live]
    if not isr:
        return None
    return LeaderIsr(isr[0], 0, isr, controller_epoch)


def offline_election(state: LeaderIsr, replicas: Sequence[int], live: Collection[int], unclean: bool,
                     controller_epoch: int) -> LeaderIsr | None:
    """The leader is gone (or there is none): the first assigned replica that is live and in the ISR
    leads, with the live part of the ISR; unclean, the first live replica leads alone, RECOVERING."""
    for replica in replicas:
        if replica in live and replica in state.isr:
            isr = [r for r in state.isr if r in live]
            return LeaderIsr(replica, state.leader_epoch + 1, isr, controller_epoch, RECOVERED)
    if unclean:
        for replica in replicas:
            if replica in live:
                return LeaderIsr(replica, state.leader_epoch + 1, [replica], controller_epoch, RECOVERING)
    return None


def preferred_election(state: LeaderIsr, replicas: Sequence[int], live: Collection[int],
                       controller_epoch: int) -> LeaderIsr | None:
    """The first assigned replica leads if it is live and in the ISR; the ISR stays as it is."""
    if not replicas:
        return None
    preferred = replicas[0]
    if preferred in live and preferred in state.isr:
        return LeaderIsr(preferred, state.leader_epoch + 1, list(state.isr), controller_epoch,
                         state.leader_recovery_state)
    return None


def controlled_shutdown_election(state: LeaderIsr, replicas: Sequence[int], live: Collection[int],
                                 shutting_down: Collection[int], controller_epoch: int) -> LeaderIsr | None:
    """The leader is shutting down: the first assigned replica live, in the ISR and not shutting down
    leads; the new ISR drops the brokers that are shutting down."""
    for replica in replicas:
        if replica in live and replica in state.isr and replica not in shutting_down:
            isr = [r for r in state.isr if r not in shutting_down]
            return LeaderIsr(replica, state.leader_epoch + 1, isr, controller_epoch, state.leader_recovery_state)
    return None


def remove_replicas_from_isr(state: LeaderIsr, removed: Collection[int], controller_epoch: int) -> LeaderIsr | None:
    """Drop `removed` from the ISR (an offline or stopping replica). The last member is never removed;
    a removed leader leaves the partition without one (-1). None when nothing changes."""
    isr = [r for r in state.isr if r not in removed]
    if not isr:
        isr = list(state.isr[-1:]) if state.isr else []
    leader = NO_LEADER if state.leader in removed else state.leader
    if isr == list(state.isr) and leader == state.leader:
        return None
    return replace(state, leader=leader, leader_epoch=state.leader_epoch + 1, isr=isr,
                   controller_epoch=controller_epoch)
