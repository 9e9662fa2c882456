"""Offsets committed inside transactions (TxnOffsetCommit) that are not decided yet.

Kafka's GroupMetadata.pendingTransactionalOffsetCommits: a transactional commit is written to
__consumer_offsets as a transactional batch of the producer, and becomes the group's committed
offset only when the transaction's COMMIT marker reaches that partition (an ABORT drops it).
While undecided, OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for it.

When several commits for one partition race, the one written later to the log wins, as in
Kafka (which compares the append offsets): a later plain commit, or a later transactional
commit that is applied first, marks the older pending one as superseded, so that it does not
overwrite the newer offset when its own transaction commits.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from .group import OffsetAndMetadata

TopicPartition = tuple[str, int]

__all__ = ["PendingTxnOffset", "PendingTxnOffsets"]


@dataclass(slots=True)
class PendingTxnOffset:
    """One undecided transactional commit and where its record sits in __consumer_offsets."""

    committed: OffsetAndMetadata
    append_offset: int
    superseded: bool = False


class PendingTxnOffsets:
    """Undecided transactional offset commits by group, producer id and partition."""

    def __init__(self) -> None:
        self._by_group: dict[str, dict[int, dict[TopicPartition, PendingTxnOffset]]] = {}
        self._groups_of_producer: dict[int, set[str]] = {}

    def __bool__(self) -> bool:
        return bool(self._by_group)

    def add(self, group_id: str, producer_id: int, offsets: dict[TopicPartition, OffsetAndMetadata],
            append_offset: int) -> None:
        """Offsets written by `producer_id`'s open transaction at `append_offset`."""
        pending = self._by_group.setdefault(group_id, {}).setdefault(producer_id, {})
        for tp, committed in offsets.items():
            pending[tp] = PendingTxnOffset(committed, append_offset)
        self._groups_of_producer.setdefault(producer_id, set()).add(group_id)

    def has_pending(self, group_id: str, tp: TopicPartition) -> bool:
        """True while a transaction holds an undecided commit for the group's partition."""
        by_producer = self._by_group.get(group_id)
        return by_producer is not None and any(tp in pending for pending in by_producer.values())

    def has_group(self, group_id: str) -> bool:
        return group_id in self._by_group

    def groups(self) -> list[str]:
        return list(self._by_group)

    def supersede(self, group_id: str, tps: Iterable[TopicPartition], before: int | None = None,
                  producer_id: int | None = None) -> None:
        """A newer offset was stored for `tps`: pending commits written before `before` (all
        when None), except `producer_id`'s, must no longer overwrite it."""
        by_producer = self._by_group.get(group_id)
        if not by_producer:
            return
        for pid, pending in by_producer.items():
            if pid == producer_id:
                continue
            for tp in tps:
                entry = pending.get(tp)
                if entry is not None and (before is None or entry.append_offset < before):
                    entry.superseded = True

    def complete(self, producer_id: int, commit: bool,
                 include: Callable[[str], bool] = lambda group_id: True
                 ) -> dict[str, dict[TopicPartition, OffsetAndMetadata]]:
        """The producer's transaction ended for the groups `include` accepts: forget their
        pending commits and, on commit, return the offsets that become committed, per group."""
        applied: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        groups = self._groups_of_producer.get(producer_id)
        if not groups:
            return applied
        for group_id in [g for g in groups if include(g)]:
            groups.discard(group_id)
            by_producer = self._by_group[group_id]
            pending = by_producer.pop(producer_id, {})
            if not by_producer:
                del self._by_group[group_id]
            if not commit:
                continue
            winners = {tp: entry for tp, entry in pending.items() if not entry.superseded}
            if not winners:
                continue
            applied[group_id] = {tp: entry.committed for tp, entry in winners.items()}
            for tp, entry in winners.items():
                self.supersede(group_id, (tp,), before=entry.append_offset, producer_id=producer_id)
        if not groups:
            del self._groups_of_producer[producer_id]
        return applied

    def merge(self, other: PendingTxnOffsets) -> None:
        """Take over `other`'s pending commits (a loaded partition's; its groups are not here)."""
        for group_id, by_producer in other._by_group.items():
            self._by_group.setdefault(group_id, {}).update(by_producer)
        for producer_id, groups in other._groups_of_producer.items():
            self._groups_of_producer.setdefault(producer_id, set()).update(groups)

    def drop_groups(self, group_ids: Iterable[str]) -> None:
        """Forget the pending commits of groups no longer coordinated here."""
        for group_id in group_ids:
            by_producer = self._by_group.pop(group_id, None)
            for pid in by_producer or ():
                groups = self._groups_of_producer.get(pid)
                if groups is not None:
                    groups.discard(group_id)
                    if not groups:
                        del self._groups_of_producer[pid]
