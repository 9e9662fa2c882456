"""Feature versioning (KIP-584) against a real broker process: ApiVersions' supported and finalized
features, UpdateFeatures through kafka-clients 3.9's Admin API (conformance/java/FeaturesCheck.java,
what kafka-features.sh calls), and finalized levels that survive a restart."""
from __future__ import annotations

import time

from conformance.broker_process import start_broker
from conformance.java.test_java_clients import JavaPrograms, java_programs  # noqa: F401  (fixture)
from kafkapy.admin.client import AdminClient
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import ApiVersionsRequest, ConsumerGroupHeartbeatRequest, UpdateFeaturesRequest

U = UpdateFeaturesRequest


def _features(bootstrap: str, cap: int | None = None):
    with AdminClient(bootstrap) as admin:
        response = admin.send(ApiVersionsRequest(client_software_name="features-test", client_software_version="1"),
                              cap=cap)
    return ({f.name: (f.min_version, f.max_version) for f in response.supported_features},
            response.finalized_features_epoch, {f.name: f.max_version_level for f in response.finalized_features})


def test_java_admin_describes_and_updates_features(broker, java_programs: JavaPrograms):  # noqa: F811
    java_programs.run("FeaturesCheck", broker.bootstrap, timeout=60)


def test_api_versions_below_v4_leave_out_features_with_a_minimum_of_zero(broker):
    """KAFKA-17492: Java clients 3.3-3.8 (ApiVersions v3) reject a supported range starting at 0 and their
    network thread dies on the first answer; Kafka lists such features only to v4 requests."""
    v4, _, finalized = _features(broker.bootstrap)
    v3, _, finalized_v3 = _features(broker.bootstrap, cap=3)
    assert v4["group.version"][0] == 0 and v4["share.version"][0] == 0 and "kraft.version" in v4
    assert {name for name, (low, _) in v4.items() if low > 0} == set(v3) and "metadata.version" in v3
    assert all(low >= 1 for low, _ in v3.values())
    assert finalized_v3 == finalized and all(level >= 1 for level in finalized.values())


def test_finalized_levels_survive_a_restart_and_bad_updates_change_nothing():
    with start_broker(overrides={"offsets.topic.replication.factor": "1"}) as broker:
        supported, epoch, finalized = _features(broker.bootstrap)
        assert supported["metadata.version"][1] >= 21 and finalized["metadata.version"] == supported[
            "metadata.version"][1]
        assert finalized.get("group.version") == 1
        with AdminClient(broker.bootstrap) as admin:
            bad = admin.send(U(feature_updates=[
                U.FeatureUpdateKey(feature="group.version", max_version_level=0, upgrade_type=2),
                U.FeatureUpdateKey(feature="no.such.feature", max_version_level=1, upgrade_type=1)]))
            assert bad.error_code == ErrorCode.INVALID_UPDATE_VERSION
            # UpdateFeatures v2 (Kafka 4.x, negotiated here) has no per-feature results: the top-level error says it
            assert bad.results == []
            assert _features(broker.bootstrap)[2] == finalized
            bad = admin.send(U(feature_updates=[U.FeatureUpdateKey(feature="metadata.version", max_version_level=8,
                                                                   upgrade_type=2)]))
            assert bad.error_code == ErrorCode.INVALID_UPDATE_VERSION  # metadata downgrades are refused
            bad = admin.send(U(feature_updates=[U.FeatureUpdateKey(feature="group.version", max_version_level=0,
                                                                   upgrade_type=1)]))
            assert bad.error_code == ErrorCode.INVALID_UPDATE_VERSION  # a downgrade must say so
            ok = admin.send(U(feature_updates=[U.FeatureUpdateKey(feature="group.version", max_version_level=0,
                                                                  upgrade_type=2)]), cap=1)
            assert ok.error_code == 0
        _, epoch_after, finalized_after = _features(broker.bootstrap)
        assert epoch_after > epoch and "group.version" not in finalized_after
        assert _join_consumer_group(broker.bootstrap) == ErrorCode.UNSUPPORTED_VERSION  # as Kafka 4.0
        broker.restart()
        assert _features(broker.bootstrap)[1:] == (epoch_after, finalized_after)
        assert _join_consumer_group(broker.bootstrap) == ErrorCode.UNSUPPORTED_VERSION
        with AdminClient(broker.bootstrap) as admin:
            assert admin.send(U(feature_updates=[U.FeatureUpdateKey(feature="group.version", max_version_level=1,
                                                                    upgrade_type=1)])).error_code == 0
        deadline = time.monotonic() + 30
        while (code := _join_consumer_group(broker.bootstrap)) in (14, 15, 16) and time.monotonic() < deadline:
            time.sleep(0.2)  # __consumer_offsets being created and loaded
        assert code == 0


def _join_consumer_group(bootstrap: str) -> int:
    """A KIP-848 member's first heartbeat: the consumer protocol needs group.version >= 1."""
    import uuid

    from kafkapy.protocol.messages import FindCoordinatorRequest

    with AdminClient(bootstrap) as admin:
        # the first FindCoordinator creates __consumer_offsets
        admin.send(FindCoordinatorRequest(key_type=0, coordinator_keys=["features-group"]), cap=4)
        return admin.send(ConsumerGroupHeartbeatRequest(
            group_id="features-group", member_id=str(uuid.uuid4()), member_epoch=0, rebalance_timeout_ms=5000,
            subscribed_topic_names=["features-topic"], topic_partitions=[]), cap=1).error_code
