"""The Java clients (kafka-clients 3.9.1) against a three-broker kafkapy cluster (ZooKeeper mode):
AdminClient describeCluster/describeTopics (leaders on every broker, ISR of 3), and a default
producer and an assign-mode consumer on partitions led by different brokers (ClusterCheck)."""
from __future__ import annotations

import uuid

import pytest

from conformance.cluster_harness import cluster3  # noqa: F401  (a fixture)
from conformance.java.test_java_clients import JavaPrograms, java_programs  # noqa: F401

pytestmark = pytest.mark.timeout(300)


def test_java_clients_see_and_use_the_cluster(cluster3, java_programs: JavaPrograms) -> None:  # noqa: F811
    java_programs.run("ClusterCheck", cluster3.bootstrap, f"java-cluster-{uuid.uuid4().hex[:8]}", "3", "6", "3000")
