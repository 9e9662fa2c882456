"""The CI slice of the long fault campaign (issue 23): the fault kinds no other CI test makes under
the recorded workload, one round each, judged by the history checker.

test_faults_partitions.py covers a leader cut off from the cluster, the controller cut off from
the brokers and a paused leader; test_faults_zookeeper.py ZooKeeper down for 60 s;
test_faults_disks.py a full and a failing log dir on a leader and a wall-clock jump. Here, with
`conformance.fault_campaign.run_campaign` itself (so the campaign script is exercised in CI too):
a leader killed with SIGKILL and restarted, one broker cut off from ZooKeeper only, and a
follower whose packets to its leader are dropped (a one-way partition). Each round heals and
waits for whole ISRs and new progress of the idempotent producer and of the exactly-once
transform application; then the checker must pass. About 90 s.
"""
from __future__ import annotations

import pytest

from conformance.fault_campaign import run_campaign
from kafkapy.devcluster.netns import NetworkLab

pytest.importorskip("confluent_kafka")
AVAILABLE, WHY_NOT = NetworkLab.available()
pytestmark = [pytest.mark.timeout(420),
              pytest.mark.skipif(not AVAILABLE, reason=f"!!! network partitions cannot be made here: {WHY_NOT}")]

KINDS = ("kill9_leader", "broker_from_zk", "one_way_follower")


def test_kill9_zookeeper_cut_and_one_way_partition_rounds_pass_the_checker(tmp_path):
    lines: list[str] = []
    result = run_campaign(tmp_path / "campaign", rounds=len(KINDS), kinds=KINDS, seed=5, say=lines.append)
    log = "\n".join(lines)
    assert [r.kind for r in result.rounds] == list(KINDS), log
    assert all(r.error is None for r in result.rounds), log
    assert result.ok, f"{result.violations}\n{log}"
    totals = result.report["totals"]
    assert totals["acked"] > 0 and totals["missing"] == 0 and totals["duplicates"] == 0, log
