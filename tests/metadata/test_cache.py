"""The broker's metadata cache as UpdateMetadata fills it (kafkapy.metadata.cache)."""
import uuid

from kafkapy.metadata.cache import DELETED_LEADER, MetadataCache
from kafkapy.protocol.messages import UpdateMetadataRequest

UM = UpdateMetadataRequest
TOPIC_ID = uuid.uuid4()


def broker(node_id: int, port: int, rack=None):
    return UM.UpdateMetadataBroker(id=node_id, rack=rack, endpoints=[UM.UpdateMetadataEndpoint(
        port=port, host="127.0.0.1", listener="PLAINTEXT", security_protocol=0)])


def state(partition: int, leader: int, epoch: int = 0, isr=(1, 2), replicas=(1, 2), offline=()):
    return UM.UpdateMetadataPartitionState(partition_index=partition, controller_epoch=1, leader=leader,
                                           leader_epoch=epoch, isr=list(isr), zk_version=epoch,
                                           replicas=list(replicas), offline_replicas=list(offline))


def request(brokers, partitions=(), controller_id=1, topic="t"):
    topics = [UM.UpdateMetadataTopicState(topic_name=topic, topic_id=TOPIC_ID, partition_states=list(partitions))] \
        if partitions else []
    return UM(controller_id=controller_id, controller_epoch=1, broker_epoch=-1, live_brokers=list(brokers),
              topic_states=topics)


def test_brokers_replace_partitions_accumulate_and_controller_is_tracked():
    cache = MetadataCache()
    delta = cache.apply(request([broker(1, 9001), broker(2, 9002, "r2")], [state(0, 1), state(1, 2)]))
    assert delta.brokers_changed and delta.controller_changed and delta.created_topics == {"t"}
    assert cache.controller_id == 1 and sorted(cache.brokers) == [1, 2]
    assert cache.endpoint(2, "PLAINTEXT") == ("127.0.0.1", 9002)
    assert [b.rack for b in cache.broker_infos("PLAINTEXT")] == [None, "r2"]
    assert cache.topic_id("t") == TOPIC_ID and cache.name_of(TOPIC_ID) == "t"
    # the broker list is a full replacement, partition states a delta
    delta = cache.apply(request([broker(1, 9001)], [state(1, 1, epoch=1, isr=(1,), offline=(2,))]))
    assert delta.brokers_changed and delta.changed_topics == {"t"} and not delta.created_topics
    assert sorted(cache.brokers) == [1] and cache.endpoint(2, "PLAINTEXT") is None
    parts = cache.partitions("t")
    assert [p.leader for p in parts] == [1, 1] and parts[1].leader_epoch == 1 and parts[1].isr == (1,)
    assert cache.offline_replicas("t", 1) == (2,)


def test_leader_minus_two_deletes_and_gaps_end_the_partition_list():
    cache = MetadataCache()
    cache.apply(request([broker(1, 9001)], [state(0, 1), state(2, 1)]))
    assert len(cache.partitions("t")) == 1  # partition 1 unknown yet: the list stops before it
    delta = cache.apply(request([broker(1, 9001)], [state(0, DELETED_LEADER), state(2, DELETED_LEADER)]))
    assert delta.deleted_topics == {"t"} and cache.partitions("t") is None
    assert cache.name_of(TOPIC_ID) is None and cache.topic_names() == []
