"""ACLs in cluster mode: created through one broker, seen and deleted through another.

Two kafkapy brokers with `authorizer.class.name` set share their ACLs through ZooKeeper, stored as
Kafka 3.7's AclAuthorizer stores them (`/kafka-acl*` znodes and `acl_changes_` notifications).

Each request is kafka-python's own CreateAcls/DescribeAcls/DeleteAcls encoding, sent on a
connection to exactly one broker: kafka-python's and confluent-kafka's admin clients send these
requests to whichever broker they like once they know the cluster, so they could not show that
broker 2 answers with what broker 1 wrote.
"""
from __future__ import annotations

import json
import uuid

import pytest

kafka = pytest.importorskip("kafka", reason="!!! kafka-python not installed: pip install -e '.[test]'")

from kafka.protocol.admin import (  # noqa: E402
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
)
from kazoo.client import KazooClient  # noqa: E402

from conformance.cluster_harness import cluster_fixture, wait_until  # noqa: E402
from conformance.kafka_wire import RawConnection  # noqa: E402

pytestmark = pytest.mark.timeout(180)

# Kafka's ZooKeeper-mode authorizer; kafkapy only needs the setting to be non-empty.
# enforcement is on: the clients and the brokers themselves (User:ANONYMOUS on PLAINTEXT) are super users
cluster2 = cluster_fixture(2, {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                               "super.users": "User:ANONYMOUS"})

ACL_API_VERSION = 3
TOPIC, GROUP = 2, 3  # resource types
ANY, LITERAL, PREFIXED = 1, 3, 4  # pattern types (ANY is also the ANY operation / permission type)
READ, WRITE = 3, 4
ALLOW = 3


def roundtrip(node, request, response_cls):
    request.with_header(correlation_id=7, client_id="kafkapy-cluster-acls")
    payload = bytes(request.encode(version=ACL_API_VERSION, header=True, framed=True))
    with RawConnection(node.bootstrap, timeout=10) as conn:
        body = conn.roundtrip(payload)
    return response_cls.decode(body, version=ACL_API_VERSION, header=True)


def describe_all(node, principal: str) -> set[tuple]:
    response = roundtrip(node, DescribeAclsRequest(
        resource_type_filter=ANY, resource_name_filter=None, pattern_type_filter=ANY, principal_filter=principal,
        host_filter=None, operation=ANY, permission_type=ANY), DescribeAclsResponse)
    assert response.error_code == 0, response
    return {(r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation, a.permission_type)
            for r in response.resources for a in r.acls}


def test_acls_created_on_one_broker_are_described_and_deleted_on_another(cluster2):
    one, two = cluster2.broker(1), cluster2.broker(2)
    principal = f"User:cluster-acls-{uuid.uuid4().hex[:8]}"
    topic, prefix = f"orders-{uuid.uuid4().hex[:8]}", f"app-{uuid.uuid4().hex[:8]}-"
    wanted = {(TOPIC, topic, LITERAL, principal, "*", READ, ALLOW),
              (TOPIC, topic, LITERAL, principal, "10.0.0.1", WRITE, ALLOW),
              (GROUP, prefix, PREFIXED, principal, "*", READ, ALLOW)}

    Creation = CreateAclsRequest.AclCreation
    created = roundtrip(one, CreateAclsRequest(creations=[
        Creation(resource_type=t, resource_name=n, resource_pattern_type=p, principal=pr, host=h, operation=o,
                 permission_type=pe) for t, n, p, pr, h, o, pe in sorted(wanted)]), CreateAclsResponse)
    assert [r.error_code for r in created.results] == [0, 0, 0]
    assert describe_all(one, principal) == wanted  # the broker that wrote them shows them at once

    wait_until(lambda: describe_all(two, principal) == wanted, timeout=30,
               message="broker 2 describes the ACLs created through broker 1")

    # What a Kafka 3.7 broker on the same ZooKeeper would read.
    zk = KazooClient(hosts=cluster2.zookeeper_connect)
    zk.start(timeout=10)
    try:
        stored = json.loads(zk.get(f"/kafka-acl/Topic/{topic}")[0])
        assert stored["version"] == 1
        assert sorted(stored["acls"], key=lambda e: e["operation"]) == [
            {"principal": principal, "permissionType": "Allow", "operation": "Read", "host": "*"},
            {"principal": principal, "permissionType": "Allow", "operation": "Write", "host": "10.0.0.1"}]
        assert json.loads(zk.get(f"/kafka-acl-extended/prefixed/Group/{prefix}")[0]) == {"version": 1, "acls": [
            {"principal": principal, "permissionType": "Allow", "operation": "Read", "host": "*"}]}
        literal_changes = [zk.get(f"/kafka-acl-changes/{c}")[0] for c in zk.get_children("/kafka-acl-changes")]
        assert f"TOPIC:{topic}".encode() in literal_changes
    finally:
        zk.stop()
        zk.close()

    Filter = DeleteAclsRequest.DeleteAclsFilter
    deleted = roundtrip(two, DeleteAclsRequest(filters=[
        Filter(resource_type_filter=TOPIC, resource_name_filter=topic, pattern_type_filter=LITERAL,
               principal_filter=principal, host_filter=None, operation=ANY, permission_type=ANY),
        Filter(resource_type_filter=ANY, resource_name_filter=None, pattern_type_filter=PREFIXED,
               principal_filter=principal, host_filter=None, operation=ANY, permission_type=ANY)]),
        DeleteAclsResponse)
    assert [r.error_code for r in deleted.filter_results] == [0, 0]
    assert [sorted((m.resource_name, m.host) for m in r.matching_acls) for r in deleted.filter_results] == [
        [(topic, "*"), (topic, "10.0.0.1")], [(prefix, "*")]]
    assert describe_all(two, principal) == set()

    wait_until(lambda: describe_all(one, principal) == set(), timeout=30,
               message="broker 1 no longer describes the ACLs deleted through broker 2")
