"""A single node is a cluster of one: every partition has one replica (this broker), the ISR is that
replica, the high watermark is the log end, and produce and fetch take the replica manager's path."""
from __future__ import annotations

from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import FetchRequest, ProduceRequest
from kafkapy.protocol.records import build_batch
from tests.broker.inprocess import InProcessBroker

NODE = 0


def _produce(node: InProcessBroker, topic: str, acks: int, partition: int = 0, value: bytes = b"v"):
    request = ProduceRequest(acks=acks, timeout_ms=1000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(
            index=partition, records=build_batch([(None, value)]))])])
    return node.call(request, 9).responses[0].partition_responses[0]


def _fetch(node: InProcessBroker, topic: str, offset: int, replica_id: int = -1, partition: int = 0):
    Topic, Part = FetchRequest.FetchTopic, FetchRequest.FetchPartition
    request = FetchRequest(replica_id=replica_id, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                           isolation_level=0, session_id=0, session_epoch=-1, topics=[
                               Topic(topic=topic, partitions=[Part(partition=partition, fetch_offset=offset,
                                                                   partition_max_bytes=1 << 20)])],
                           forgotten_topics_data=[], rack_id="")
    return node.call(request, 12).responses[0].partitions[0]


def test_every_partition_has_one_replica_and_an_isr_of_one(tmp_path):
    node = InProcessBroker(tmp_path)
    try:
        meta = node.create_topic("t", 3)
        replicas = node.broker.replicas
        for index in range(3):
            part = replicas.partition("t", index)
            assert part.is_leader and part.leader_id == NODE
            assert part.replicas == (NODE,) and part.isr == (NODE,)
            assert part.leader_epoch == meta.partitions[index].leader_epoch
            assert part.log is node.broker.partitions.get_log("t", index)
        assert replicas.leader_error("t", 0) == ErrorCode.NONE
        assert replicas.topic_name(meta.topic_id) == "t"
    finally:
        node.close()


def test_high_watermark_is_the_log_end_and_acks_all_waits_for_no_one(tmp_path):
    node = InProcessBroker(tmp_path)
    try:
        node.create_topic("t", 1)
        for acks in (1, -1, -1):
            assert _produce(node, "t", acks).error_code == 0
        part = node.broker.replicas.partition("t", 0)
        assert part.log.log_end_offset == 3 and part.log.high_watermark == 3
        fetched = _fetch(node, "t", 0)
        assert fetched.error_code == 0 and fetched.high_watermark == 3 and len(fetched.records) > 0
    finally:
        node.close()


def test_min_insync_replicas_above_the_replica_count_is_capped_as_kafka_does(tmp_path):
    # Kafka's Partition.effectiveMinIsr: min(min.insync.replicas, replicas); a cluster of one has one
    # replica per partition, so acks=all is taken (Kafka 3.7 and 4.x alike, issue 30)
    node = InProcessBroker(tmp_path, **{"min.insync.replicas": 2})
    try:
        node.create_topic("t", 1)
        assert _produce(node, "t", -1).error_code == 0
        assert node.broker.replicas.partition("t", 0).log.log_end_offset == 1
        assert _produce(node, "t", 1).error_code == 0
    finally:
        node.close()


def test_a_fetch_as_a_replica_is_refused_there_is_no_follower(tmp_path):
    node = InProcessBroker(tmp_path)
    try:
        node.create_topic("t", 1)
        assert _produce(node, "t", 1).error_code == 0
        assert _fetch(node, "t", 0, replica_id=5).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    finally:
        node.close()


def test_deleting_a_topic_stops_hosting_its_partitions(tmp_path):
    node = InProcessBroker(tmp_path)
    try:
        node.create_topic("t", 2)
        node.broker.partitions.delete_topic("t")
        assert node.broker.replicas.partition("t", 0) is None
        assert node.broker.replicas.leader_error("t", 0) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert _fetch(node, "t", 0).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    finally:
        node.close()


def test_new_partitions_and_a_new_leader_epoch_are_led_at_once(tmp_path):
    node = InProcessBroker(tmp_path)
    try:
        node.create_topic("t", 1)
        node.broker.partitions.create_partitions("t", 2)
        assert node.broker.replicas.partition("t", 1).is_leader
        new = node.broker.metadata.bump_leader_epoch("t", 0)
        assert node.broker.replicas.partition("t", 0).leader_epoch == new.leader_epoch
        assert node.broker.partitions.leader_epoch("t", 0) == new.leader_epoch
    finally:
        node.close()


def test_partitions_loaded_at_start_are_led_again(tmp_path):
    node = InProcessBroker(tmp_path)
    node.create_topic("t", 1)
    assert _produce(node, "t", 1).error_code == 0
    node.broker.logs.flush_dirty()
    node.close()
    node = InProcessBroker(tmp_path)
    try:
        part = node.broker.replicas.partition("t", 0)
        assert part.is_leader and part.isr == (NODE,)
        assert part.log.high_watermark == part.log.log_end_offset == 1
    finally:
        node.close()
