"""The controller's preferred-leader elections, as Kafka 3.7's ZooKeeper-mode controller has them:
the partitions named in /admin/preferred_replica_election, and the automatic balancing that moves
leadership back to the preferred replica of a broker whose share of imbalanced partitions is over
leader.imbalance.per.broker.percentage, every leader.imbalance.check.interval.seconds.
"""
from __future__ import annotations

import asyncio
import logging

from ..protocol.errors import ErrorCode
from .leader_election import preferred_election
from ..metadata.zk.paths import LeaderIsr

__all__ = ["PreferredLeaders"]

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


class PreferredLeaders:
    """KafkaController's preferred-leader elections (a mixin: state and helpers are the controller's)."""

    async def _on_zk_preferred_election(self) -> None:
        """/admin/preferred_replica_election (the tools before 2.4): elect the preferred leaders of
        the partitions it names (those of topics being deleted are skipped), then delete it."""
        partitions = await self._zk(self.zk.get_preferred_replica_election)
        if partitions is None:
            return
        wanted = sorted(key for key in partitions if key[0] not in self.deleting)
        if wanted:
            outcomes = await self._elect_leaders(wanted, False)
            failed = {f"{t}-{p}": ErrorCode(code).name for (t, p), (code, _) in outcomes.items()
                      if code not in (ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED)}
            if failed:
                log.warning("controller %d: preferred replica election from %s failed for %s", self.node_id,
                            "/admin/preferred_replica_election", failed)
        await self._zk(self.zk.delete_admin_path, "/admin/preferred_replica_election", self.epoch_zk_version)

    # -- automatic preferred-leader balancing ---------------------------------------------------
    async def _rebalance_timer(self) -> None:
        await asyncio.sleep(5)
        while True:
            self.post("rebalance")
            await asyncio.sleep(self.rebalance_interval_s)

    async def _rebalance_leaders(self) -> None:
        live = self._live_ids()
        by_preferred: dict[int, list[TopicPartition]] = {}
        for key in self.states:
            if key[0] in self.deleting or key[0] not in self.topics or self._assignment(key).being_reassigned:
                continue
            replicas = self.topics[key[0]].partitions.get(key[1], [])
            if replicas:
                by_preferred.setdefault(replicas[0], []).append(key)
        changes: dict[TopicPartition, LeaderIsr] = {}
        for preferred, keys in by_preferred.items():
            if preferred not in live:
                continue
            imbalanced = [k for k in keys if self.states[k][0].leader != preferred]
            if not keys or len(imbalanced) * 100 <= self.imbalance_percentage * len(keys):
                continue
            for key in imbalanced:
                elected = preferred_election(self.states[key][0], self.topics[key[0]].partitions[key[1]], live,
                                             self.epoch)
                if elected is not None:
                    changes[key] = elected
        if changes:
            log.info("controller %d: moving %d partition(s) back to their preferred leaders", self.node_id,
                     len(changes))
            await self._apply(changes)
