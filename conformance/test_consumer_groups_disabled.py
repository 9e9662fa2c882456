"""A broker with group.coordinator.rebalance.protocols=classic: the KIP-848 APIs are not advertised
(as Kafka, which exposes ConsumerGroupHeartbeat/ConsumerGroupDescribe only with the consumer
protocol on); the classic group APIs stay."""
from __future__ import annotations

from conformance.broker_process import start_broker
from conformance.kafka_wire import RawConnection, api_versions_request, parse_api_versions_v0

CONSUMER_GROUP_HEARTBEAT = 68
CONSUMER_GROUP_DESCRIBE = 69


def advertised(bootstrap: str) -> dict[int, tuple[int, int]]:
    with RawConnection(bootstrap) as conn:
        return parse_api_versions_v0(conn.roundtrip(api_versions_request(0, correlation_id=5))).ranges


def test_consumer_protocol_apis_follow_the_rebalance_protocols_setting() -> None:
    with start_broker(overrides={"offsets.topic.replication.factor": "1"}) as on:
        ranges = advertised(on.bootstrap)
        assert ranges[CONSUMER_GROUP_HEARTBEAT] == (0, 1)
        assert ranges[CONSUMER_GROUP_DESCRIBE] == (0, 1)
    with start_broker(overrides={"offsets.topic.replication.factor": "1",
                                 "group.coordinator.rebalance.protocols": "classic"}) as off:
        ranges = advertised(off.bootstrap)
        assert CONSUMER_GROUP_HEARTBEAT not in ranges and CONSUMER_GROUP_DESCRIBE not in ranges
        assert 11 in ranges and 12 in ranges  # JoinGroup, Heartbeat: the classic protocol stays
