"""A transaction after the log dir holding the transaction coordinator's __transaction_state replica
filled up (campaign #5, round 38).

The coordinator's broker keeps leading a partition of the sink topic from its other, healthy log
dir. The controller moves __transaction_state leadership away; the full replica cannot take that
LeaderAndIsr and stays "leader" at its old epoch on its own broker. The produce to the sink
partition is verified (KIP-890) with the transactional id's coordinator: it must be the new one, as
the metadata names it (Kafka's AddPartitionsToTxnManager), not the stale local one, which never
heard of the new transaction and answered INVALID_TXN_STATE.
"""
from __future__ import annotations

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic

from conformance.cluster_harness import (
    ClusterUnreachable,
    describe,
    start_cluster,
    wait_until,
)
from conformance.fault_workload import FAULT_OVERRIDES
from kafkapy.groupcoord.offsets_topic import partition_for

pytestmark = pytest.mark.timeout(240)

TXN_STATE = "__transaction_state"
TID = "txn-dir-full"
SINK = "txn-sink"
SINK_PARTITIONS = 4


def transaction(producer, partitions: list[int], tag: str) -> None:
    producer.begin_transaction()
    for p in partitions:
        producer.produce(SINK, value=f"{tag}-{p}".encode(), partition=p)
    producer.commit_transaction(30)


def test_a_transaction_after_the_coordinators_log_dir_filled_up(tmp_path):
    overrides = {**FAULT_OVERRIDES, "kafkapy.log.dir.space.check.interval.ms": "300"}
    cluster = start_cluster(tmp_path, 3, overrides, control=True, log_dirs=2)
    with cluster:
        producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": TID,
                                             "transaction.timeout.ms": 60000})
        producer.init_transactions(60)  # creates __transaction_state
        state_partition = partition_for(TID, int(FAULT_OVERRIDES["transaction.state.log.num.partitions"]))
        coordinator = describe(cluster, TXN_STATE)[state_partition].leader
        node = cluster.broker(coordinator)
        state_dir = node.log_dir_of(TXN_STATE, state_partition)
        others = [b for b in cluster.brokers if b != coordinator]
        # every sink partition led by the coordinator's broker, so that some live in its other dir
        assignment = [[coordinator, *others] for _ in range(SINK_PARTITIONS)]
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        created = admin.create_topics([NewTopic(SINK, num_partitions=SINK_PARTITIONS, replica_assignment=assignment)])
        created[SINK].result(30)
        wait_until(lambda: all(s.leader == coordinator and len(s.isr) == 3
                               for s in describe(cluster, SINK).values()), 30, ignore=(ClusterUnreachable, KeyError),
                   message=f"{SINK} led by broker {coordinator}")
        healthy = [p for p in range(SINK_PARTITIONS) if node.log_dir_of(SINK, p) != state_dir]
        assert healthy, f"every {SINK} partition is in {state_dir}: no partition to test with"
        transaction(producer, list(range(SINK_PARTITIONS)), "before")

        # The dir notices it is full on its next write: the producer's next AddPartitionsToTxn
        # (answered NOT_COORDINATOR, as Kafka does). The controller then moves __transaction_state
        # leadership, the producer finds the new coordinator and produces to the partitions led here.
        node.control_request("POST", "/storage-faults", {"log_dir": str(state_dir), "error": "ENOSPC"})
        try:
            try:
                transaction(producer, healthy, "after")
            except confluent_kafka.KafkaException as exc:
                pytest.fail(f"a transaction to {SINK} {healthy} (led by broker {coordinator} from a healthy "
                            f"dir) failed after its coordinator's log dir filled up: {exc}")
            moved = describe(cluster, TXN_STATE)[state_partition]
            assert moved.leader not in (coordinator, -1), f"{TXN_STATE}-{state_partition} did not move: {moved}"
            assert all(describe(cluster, SINK)[p].leader == coordinator for p in healthy)
        finally:
            node.control_request("DELETE", "/storage-faults")
