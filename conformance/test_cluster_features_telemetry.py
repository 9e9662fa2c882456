"""Features and client-metrics subscriptions in a ZooKeeper cluster: finalized through one broker,
the same on the other (read from /feature and /config/client-metrics), and after a restart."""
from __future__ import annotations

import pytest

from conformance.cluster_harness import cluster_fixture, wait_until
from kafkapy.admin.client import AdminClient
from kafkapy.protocol.messages import (
    ApiVersionsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
    ListClientMetricsResourcesRequest,
    UpdateFeaturesRequest,
)

pytestmark = pytest.mark.timeout(180)

cluster2 = cluster_fixture(2)
U, R, D = UpdateFeaturesRequest, IncrementalAlterConfigsRequest, DescribeConfigsRequest


def _finalized(node) -> dict[str, int]:
    with AdminClient(node.bootstrap) as admin:
        response = admin.send(ApiVersionsRequest(client_software_name="cluster-features", client_software_version="1"))
    return {f.name: f.max_version_level for f in response.finalized_features}


def _subscriptions(node) -> dict[str, dict[str, str]]:
    with AdminClient(node.bootstrap) as admin:
        listed = admin.send(ListClientMetricsResourcesRequest(resource_types=[16]))
        names = [r.name for r in listed.client_metrics_resources]
        out = {}
        for name in names:
            result = admin.send(D(resources=[D.DescribeConfigsResource(resource_type=16, resource_name=name,
                                                                       configuration_keys=None)])).results[0]
            out[name] = {c.name: c.value for c in result.configs}
    return out


def test_features_and_subscriptions_are_the_same_on_every_broker(cluster2):
    one, two = cluster2.broker(1), cluster2.broker(2)
    assert _finalized(one).get("group.version") == 1 and _finalized(two).get("group.version") == 1
    with AdminClient(one.bootstrap) as admin:
        assert admin.send(U(feature_updates=[U.FeatureUpdateKey(feature="group.version", max_version_level=0,
                                                                upgrade_type=2)])).error_code == 0
        assert admin.send(R(resources=[R.AlterConfigsResource(resource_type=16, resource_name="everyone", configs=[
            R.AlterableConfig(name="metrics", config_operation=0, value="org.apache.kafka.producer."),
            R.AlterableConfig(name="interval.ms", config_operation=0, value="5000")])],
            validate_only=False)).responses[0].error_code == 0
    wait_until(lambda: "group.version" not in _finalized(two), timeout=10)
    wanted = {"everyone": {"metrics": "org.apache.kafka.producer.", "interval.ms": "5000"}}
    assert _subscriptions(two) == wanted
    two.restart()
    assert "group.version" not in _finalized(two) and "metadata.version" in _finalized(two)
    assert _subscriptions(two) == wanted
