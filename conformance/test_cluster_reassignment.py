"""Partition reassignment in a cluster, with real processes (ZooKeeper + three kafkapy brokers) and
kafka-python's admin client (the Java AdminClient's run is conformance/java/test_java_cluster.py).

- Move a replication-factor-1 topic from broker 1 to brokers 2 and 3 while an idempotent acks=all
  producer and a consumer run, the copy throttled as `kafka-reassign-partitions --throttle` does: ListPartitionReassignments shows the move, then nothing; nothing
  acknowledged is lost or duplicated; broker 1's files are gone.
- Raise a topic's replication factor from 1 to 3 and lower it back.
- Cancel a reassignment halfway (a target broker that is down never catches up): the partition
  goes back to its original replicas and the adding replica's data is removed.
- The legacy /admin/reassign_partitions and /admin/preferred_replica_election znodes (the tools
  before 2.4) work too; unreadable JSON in them is ignored, as Kafka does.
- Bad requests (unknown broker, duplicate replica, unknown partition, cancel with nothing running)
  get Kafka's error codes and change nothing.
"""
from __future__ import annotations

import json
import time
import uuid

import pytest

from conformance.cluster_harness import cluster_fixture, controller_id, describe, wait_for_isr, wait_until

kafka = pytest.importorskip("kafka")
pytest.importorskip("confluent_kafka")
from kafka import TopicPartition  # noqa: E402
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient  # noqa: E402
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402

from conformance.replication_campaign import CLUSTER_OVERRIDES, wait_for_controller_everywhere  # noqa: E402
from conformance.replication_workload import SequenceProducer, TailingConsumer, check_records, read_topic  # noqa: E402

pytestmark = pytest.mark.timeout(300)

NO_REASSIGNMENT_IN_PROGRESS = 85
INVALID_REPLICA_ASSIGNMENT = 39
UNKNOWN_TOPIC_OR_PARTITION = 3
PREFILL = b"f" * 1000

cluster = cluster_fixture(3, {**CLUSTER_OVERRIDES, "auto.leader.rebalance.enable": "false"})


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture()
def admin(cluster):
    wait_for_controller_everywhere(cluster)
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=30000)
    try:
        yield client
    finally:
        client.close()


def create(admin: KafkaAdminClient, name: str, assignments: dict[int, list[int]]) -> None:
    # As in Kafka, acks=all needs an ISR of at least min(min.insync.replicas, replicas) (2 in this
    # cluster): the topics that start with one replica ask for one, so that the minimum stays 1 while
    # a reassignment adds replicas that are not yet in sync.
    configs = {"min.insync.replicas": "1"} if min(len(r) for r in assignments.values()) < 2 else {}
    admin.create_topics({name: {"assignments": assignments, "configs": configs}}, timeout_ms=30000)


def ongoing(admin: KafkaAdminClient, topic: str) -> dict[int, dict]:
    listed = admin.list_partition_reassignments()
    return {tp.partition: entry for tp, entry in listed.items() if tp.topic == topic}


def set_configs(admin: KafkaAdminClient, changes: dict[tuple, dict[str, str | None]]) -> None:
    """IncrementalAlterConfigs: SET each value, DELETE each None."""
    resources = [ConfigResource(kind, name, configs={k: (("DELETE", None) if v is None else ("SET", v))
                                                       for k, v in configs.items()})
                 for (kind, name), configs in changes.items()]
    result = admin.alter_configs(resources, incremental=True)
    failed = {kind: {name: err for name, err in by_name.items() if err is not None and
                     getattr(err, "errno", 0)} for kind, by_name in result.items()}
    assert not any(failed.values()), failed


def partition_dirs(cluster, broker_id: int, topic: str) -> list[str]:
    return sorted(p.name for p in cluster.broker(broker_id).log_dir.glob(f"{topic}-*") if p.is_dir())


def reassign(admin: KafkaAdminClient, targets: dict[tuple[str, int], list[int] | None]) -> dict[int, int]:
    """AlterPartitionReassignments; partition -> error code (kafka-python gives None or an error class)."""
    result = admin.alter_partition_reassignments({TopicPartition(t, p): r for (t, p), r in targets.items()})
    return {tp.partition: (err.errno if err is not None else 0) for tp, err in result.items()}


def test_move_rf1_topic_to_two_other_brokers_under_load(cluster, admin):
    topic = unique("move")
    partitions = 2
    create(admin, topic, {p: [1] for p in range(partitions)})
    wait_until(lambda: all(s.leader == 1 for s in describe(cluster, topic).values()) and
               len(describe(cluster, topic)) == partitions, 30, message="topic on broker 1")
    # about 3 MB to copy, throttled to 1 MB/s per follower as kafka-reassign-partitions --throttle
    # sets it, so that the move is seen in progress
    prefill = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 20})
    for i in range(3000):
        prefill.produce(topic, value=PREFILL, partition=i % partitions)
    assert prefill.flush(30) == 0
    set_configs(admin, {(ConfigResourceType.BROKER, str(b)): {"follower.replication.throttled.rate": "1000000"}
                        for b in (2, 3)})
    set_configs(admin, {(ConfigResourceType.TOPIC, topic): {"follower.replication.throttled.replicas": "*"}})
    producer = SequenceProducer(cluster.bootstrap, topic, partitions, rate=400.0)
    consumer = TailingConsumer(cluster.bootstrap, topic, partitions)
    producer.start()
    consumer.start()
    try:
        wait_until(lambda: min(producer.acked_counts()) >= 200, 60, message="first acknowledgements")
        errors = reassign(admin, {(topic, p): [2, 3] for p in range(partitions)})
        assert set(errors.values()) == {0}, errors
        # while it runs: RS = target + original, adding [2, 3], removing [1]
        seen = ongoing(admin, topic)
        assert sorted(seen) == list(range(partitions)), seen
        for entry in seen.values():
            assert entry == {"replicas": [2, 3, 1], "adding_replicas": [2, 3], "removing_replicas": [1]}, entry
        started = time.monotonic()
        wait_until(lambda: not ongoing(admin, topic), 60, message="reassignment finished")
        assert time.monotonic() - started > 1.0  # the throttle held the copy back
        set_configs(admin, {(ConfigResourceType.BROKER, str(b)): {"follower.replication.throttled.rate": None}
                            for b in (2, 3)})
        final = wait_until(lambda: (d := describe(cluster, topic)) and all(
            s.replicas == (2, 3) and sorted(s.isr) == [2, 3] for s in d.values()) and d, 30,
            message="replicas [2, 3] in sync")
        assert all(s.leader == 2 for s in final.values()), final
        at_move = producer.acked_counts()
        wait_until(lambda: all(now >= then + 100 for now, then in zip(producer.acked_counts(), at_move)), 60,
                   message="acknowledgements after the move")
    finally:
        producer.stop(flush_timeout=30.0)
    consumer.stop()
    assert not producer.fatal_errors, producer.fatal_errors
    records = read_topic(cluster.bootstrap, topic, partitions)
    assert sum(1 for part in records for _, v in part if v == PREFILL) == 3000
    check = check_records([[(o, v) for o, v in part if v != PREFILL] for part in records], producer.acked(),
                          producer.sent())
    assert check.ok, check.violations
    assert check.acked == producer.acked_total() > 0 and check.missing == 0 and check.duplicates == 0
    assert not consumer.changed, consumer.changed
    wait_until(lambda: not partition_dirs(cluster, 1, topic), 30, message="broker 1's replicas deleted")
    assert partition_dirs(cluster, 2, topic) == partition_dirs(cluster, 3, topic) == \
        [f"{topic}-{p}" for p in range(partitions)]


def test_raise_replication_factor_then_lower_it(cluster, admin):
    topic = unique("rf")
    create(admin, topic, {0: [1]})
    wait_until(lambda: describe(cluster, topic).get(0) and describe(cluster, topic)[0].leader == 1, 30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(2000):
        producer.produce(topic, value=b"x" * 100 + str(i).encode(), partition=0)
        if i % 500 == 0:
            producer.flush(10)
    producer.flush(30)
    assert (reassign(admin, {(topic, 0): [1, 2, 3]})) == {0: 0}
    wait_until(lambda: not ongoing(admin, topic), 60, message="RF 3 reached")
    state = wait_for_isr(cluster, topic, 3)[0]
    assert state.replicas == (1, 2, 3) and state.leader == 1
    assert (reassign(admin, {(topic, 0): [3]})) == {0: 0}
    wait_until(lambda: not ongoing(admin, topic), 60, message="RF 1 again")
    state = wait_until(lambda: (s := describe(cluster, topic)[0]).replicas == (3,) and s, 30)
    assert state.leader == 3 and state.isr == (3,)
    wait_until(lambda: not partition_dirs(cluster, 1, topic) and not partition_dirs(cluster, 2, topic), 30,
               message="replicas on brokers 1 and 2 deleted")
    records = read_topic(cluster.bootstrap, topic, 1)[0]
    assert len(records) == 2000 and [v for _, v in records] == [b"x" * 100 + str(i).encode() for i in range(2000)]


def test_cancel_a_reassignment_halfway(cluster, admin):
    # The broker to add is killed just before the request: the controller counts it as alive until
    # its ZooKeeper session expires, so the request is accepted, and the new replica never catches up.
    controller = controller_id(cluster)
    victim = max(b for b in (1, 2, 3) if b != controller)
    replicas = [b for b in (1, 2, 3) if b != victim]
    topic = unique("cancel")
    create(admin, topic, {0: replicas})
    wait_for_isr(cluster, topic, 2)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(500):
        producer.produce(topic, value=str(i).encode(), partition=0)
    producer.flush(30)
    before = describe(cluster, topic)[0]
    cluster.broker(victim).kill9()
    try:
        assert reassign(admin, {(topic, 0): [*replicas, victim]}) == {0: 0}
        entry = ongoing(admin, topic)[0]
        assert entry == {"replicas": [*replicas, victim], "adding_replicas": [victim], "removing_replicas": []}
        assert reassign(admin, {(topic, 0): None}) == {0: 0}
        wait_until(lambda: not ongoing(admin, topic), 30, message="cancelled")
        state = wait_until(lambda: (s := describe(cluster, topic)[0]).replicas == tuple(replicas) and s, 30)
        assert sorted(state.isr) == sorted(replicas) and state.leader == before.leader
    finally:
        cluster.broker(victim).start()
    wait_until(lambda: victim in live_brokers(cluster), 60, message=f"broker {victim} back")
    assert not partition_dirs(cluster, victim, topic)
    # nothing in progress now: a cancel answers NO_REASSIGNMENT_IN_PROGRESS
    assert reassign(admin, {(topic, 0): None}) == {0: NO_REASSIGNMENT_IN_PROGRESS}
    records = read_topic(cluster.bootstrap, topic, 1)[0]
    assert [v for _, v in records] == [str(i).encode() for i in range(500)]


def live_brokers(cluster) -> set[int]:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    try:
        return set(admin.list_topics(timeout=5).brokers)
    except Exception:
        return set()


def test_bad_reassignments_get_kafkas_errors_and_change_nothing(cluster, admin):
    topic = unique("bad")
    create(admin, topic, {0: [1, 2]})
    wait_for_isr(cluster, topic, 2)
    before = describe(cluster, topic)
    result = (reassign(admin, {(topic, 0): [1, 7]}))
    assert result == {0: INVALID_REPLICA_ASSIGNMENT}
    assert (reassign(admin, {(topic, 0): [2, 2]})) == {0: INVALID_REPLICA_ASSIGNMENT}
    assert (reassign(admin, {(topic, 5): [1, 2]})) == {5: UNKNOWN_TOPIC_OR_PARTITION}
    assert (reassign(admin, {("no-such-topic", 0): [1]})) == {0: UNKNOWN_TOPIC_OR_PARTITION}
    assert (reassign(admin, {(topic, 0): None})) == {0: NO_REASSIGNMENT_IN_PROGRESS}
    time.sleep(0.5)
    assert describe(cluster, topic) == before
    assert not ongoing(admin, topic)


def test_legacy_reassign_partitions_znode(cluster, admin):
    from kazoo.client import KazooClient
    topic = unique("znode")
    create(admin, topic, {0: [1], 1: [2]})
    wait_until(lambda: len(describe(cluster, topic)) == 2 and all(s.leader >= 0 for s in describe(cluster, topic).values()), 30)
    zk = KazooClient(hosts=cluster.zookeeper_connect)
    zk.start(timeout=15)
    try:
        zk.create("/admin/reassign_partitions", json.dumps({"version": 1, "partitions": [
            {"topic": topic, "partition": 0, "replicas": [3]},
            {"topic": topic, "partition": 1, "replicas": [2, 1]}]}).encode(), makepath=True)
        wait_until(lambda: zk.exists("/admin/reassign_partitions") is None, 60,
                   message="the controller deleted /admin/reassign_partitions")
        state = wait_until(lambda: (d := describe(cluster, topic)) and d[0].replicas == (3,) and
                           d[1].replicas == (2, 1) and len(d[1].isr) == 2 and d, 30)
        assert state[0].leader == 3
        data, _ = zk.get(f"/brokers/topics/{topic}")
        znode = json.loads(data)
        assert znode["partitions"] == {"0": [3], "1": [2, 1]}
        assert znode["adding_replicas"] == {} and znode["removing_replicas"] == {}

        # a reordering only changes the preferred replica; the legacy election znode then moves the leader
        assert reassign(admin, {(topic, 1): [1, 2]}) == {1: 0}
        wait_until(lambda: describe(cluster, topic)[1].replicas == (1, 2), 30)
        assert describe(cluster, topic)[1].leader == 2
        zk.create("/admin/preferred_replica_election", json.dumps({"version": 1, "partitions": [
            {"topic": topic, "partition": 1}, {"topic": "no-such-topic", "partition": 0}]}).encode())
        wait_until(lambda: zk.exists("/admin/preferred_replica_election") is None, 30,
                   message="the controller deleted /admin/preferred_replica_election")
        wait_until(lambda: describe(cluster, topic)[1].leader == 1, 30, message="preferred leader 1")

        # unreadable JSON is ignored with a warning, as Kafka does; the controller carries on
        zk.create("/admin/reassign_partitions", b"{not json")
        time.sleep(1)
        assert reassign(admin, {(topic, 1): [2, 1]}) == {1: 0}
        wait_until(lambda: describe(cluster, topic)[1].replicas == (2, 1), 30)
        zk.delete("/admin/reassign_partitions")
    finally:
        zk.stop()
        zk.close()


def test_a_reassignment_survives_controller_failover_and_completes_when_its_broker_returns(cluster, admin):
    controller = controller_id(cluster)
    victim, other = [b for b in (1, 2, 3) if b != controller]
    topic = unique("failover")
    create(admin, topic, {0: [other]})
    wait_until(lambda: describe(cluster, topic).get(0) and describe(cluster, topic)[0].leader == other, 30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(1000):
        producer.produce(topic, value=str(i).encode(), partition=0)
    producer.flush(30)
    cluster.broker(victim).kill9()  # still alive for the controller until its session expires
    try:
        assert reassign(admin, {(topic, 0): [other, victim]}) == {0: 0}
        cluster.broker(controller).restart()  # SIGTERM: another broker takes over as controller
        wait_until(lambda: controller_id(cluster, via=other) not in (-1, controller), 60,
                   message="a new controller")
        # the new controller knows the reassignment from the topic znode
        fresh = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=30000)
        try:
            entry = wait_until(lambda: ongoing(fresh, topic).get(0), 30, ignore=(Exception,),
                               message="the reassignment listed by the new controller")
            assert entry["adding_replicas"] == [victim]
        finally:
            fresh.close()
    finally:
        cluster.broker(victim).start()
    # a new client again: kafka-python's admin keeps the old controller's id, and once its metadata has
    # lost that broker (down while it restarted) it raises UnknownBrokerIdError without asking anyone
    fresh = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=30000)
    try:
        wait_until(lambda: not ongoing(fresh, topic), 60, ignore=(Exception,), message="reassignment finished")
    finally:
        fresh.close()
    state = wait_until(lambda: (s := describe(cluster, topic)[0]).replicas == (other, victim) and
                       len(s.isr) == 2 and s, 30)
    assert state.leader == other
    records = read_topic(cluster.bootstrap, topic, 1)[0]
    assert [v for _, v in records] == [str(i).encode() for i in range(1000)]
