"""CreateAcls / DescribeAcls / DeleteAcls handlers: SECURITY_DISABLED without an authorizer, storage with one."""
from __future__ import annotations

import pytest

from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    CreateAclsRequest,
    DeleteAclsRequest,
    DescribeAclsRequest,
)
from tests.broker.inprocess import InProcessBroker

TOPIC, GROUP, CLUSTER, ANY_TYPE = 2, 3, 4, 1
LITERAL, PREFIXED, MATCH, ANY_PATTERN = 3, 4, 2, 1
READ, WRITE, ANY_OP = 3, 4, 1
ALLOW, DENY, ANY_PERM = 3, 2, 1
ACL_VERSIONS = (1, 2, 3)


@pytest.fixture
def broker(tmp_path):
    b = InProcessBroker(tmp_path, **{"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"})
    yield b
    b.close()


@pytest.fixture
def broker_without_authorizer(tmp_path):
    b = InProcessBroker(tmp_path)
    yield b
    b.close()


def creation(name="orders", rtype=TOPIC, ptype=LITERAL, principal="User:alice", host="*", op=READ, perm=ALLOW):
    return CreateAclsRequest.AclCreation(resource_type=rtype, resource_name=name, resource_pattern_type=ptype,
                                         principal=principal, host=host, operation=op, permission_type=perm)


def describe(name=None, rtype=ANY_TYPE, ptype=ANY_PATTERN, principal=None, host=None, op=ANY_OP, perm=ANY_PERM):
    return DescribeAclsRequest(resource_type_filter=rtype, resource_name_filter=name, pattern_type_filter=ptype,
                               principal_filter=principal, host_filter=host, operation=op, permission_type=perm)


def delete_filter(name=None, rtype=ANY_TYPE, ptype=ANY_PATTERN, principal=None, host=None, op=ANY_OP,
                  perm=ANY_PERM):
    return DeleteAclsRequest.DeleteAclsFilter(
        resource_type_filter=rtype, resource_name_filter=name, pattern_type_filter=ptype, principal_filter=principal,
        host_filter=host, operation=op, permission_type=perm)


@pytest.mark.parametrize("version", ACL_VERSIONS)
def test_without_an_authorizer_every_acl_api_answers_security_disabled(broker_without_authorizer, version):
    b = broker_without_authorizer
    created = b.call(CreateAclsRequest(creations=[creation(), creation("x")]), version)
    assert [(r.error_code, r.error_message) for r in created.results] == \
        [(ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")] * 2
    described = b.call(describe(), version)
    assert (described.error_code, described.error_message, described.resources) == \
        (ErrorCode.SECURITY_DISABLED, "No Authorizer is configured on the broker", [])
    deleted = b.call(DeleteAclsRequest(filters=[delete_filter()]), version)
    assert [(r.error_code, r.matching_acls) for r in deleted.filter_results] == [(ErrorCode.SECURITY_DISABLED, [])]


@pytest.mark.parametrize("version", ACL_VERSIONS)
def test_create_describe_delete(broker, version):
    created = broker.call(CreateAclsRequest(creations=[
        creation(), creation(op=WRITE), creation("orders-", ptype=PREFIXED, principal="User:bob", perm=DENY),
        creation("grp", GROUP), creation("", op=READ), creation("c", CLUSTER), creation(ptype=MATCH),
        creation(principal="alice")]), version)
    assert [r.error_code for r in created.results] == [0, 0, 0, 0] + [ErrorCode.INVALID_REQUEST] * 4
    assert created.results[0].error_message is None
    assert [r.error_message for r in created.results[4:]] == [
        "Invalid empty resource name", "The only valid name for the CLUSTER resource is kafka-cluster",
        "Invalid patternType MATCH",
        "Could not parse principal from `alice` (no colon is present separating the principal type from the "
        "principal name)"]

    everything = broker.call(describe(), version)
    assert everything.error_code == 0
    # One resource entry per pattern, each listing its entries.
    assert [(r.resource_type, r.resource_name, r.pattern_type, [(a.principal, a.operation) for a in r.acls])
            for r in everything.resources] == [
        (TOPIC, "orders", LITERAL, [("User:alice", READ), ("User:alice", WRITE)]),
        (TOPIC, "orders-", PREFIXED, [("User:bob", READ)]),
        (GROUP, "grp", LITERAL, [("User:alice", READ)])]

    # MATCH finds every pattern that covers a concrete resource name.
    matched = broker.call(describe("orders-eu", TOPIC, MATCH), version)
    assert [(r.resource_name, r.pattern_type) for r in matched.resources] == [("orders-", PREFIXED)]
    assert broker.call(describe("orders", TOPIC, LITERAL, principal="User:alice", op=WRITE), version).resources[0] \
        .acls[0].operation == WRITE

    deleted = broker.call(DeleteAclsRequest(filters=[
        delete_filter("orders", TOPIC, LITERAL, op=READ, perm=ALLOW), delete_filter(rtype=0),
        delete_filter(principal="User:nobody")]), version)
    first, unknown, none = deleted.filter_results
    assert first.error_code == 0 and [(a.resource_name, a.operation, a.permission_type, a.error_code)
                                      for a in first.matching_acls] == [("orders", READ, ALLOW, 0)]
    assert (unknown.error_code, unknown.error_message) == (ErrorCode.INVALID_REQUEST, "Unknown patternFilter.")
    assert (none.error_code, none.matching_acls) == (0, [])
    remaining = broker.call(describe(), version)
    assert [(r.resource_name, len(r.acls)) for r in remaining.resources] == [("orders", 1), ("orders-", 1), ("grp", 1)]


def test_describe_with_unknown_filter_values_is_an_invalid_request(broker):
    response = broker.call(describe(op=0), 3)
    assert response.error_code == ErrorCode.INVALID_REQUEST


def test_acls_survive_a_restart(tmp_path):
    props = {"authorizer.class.name": "x"}
    b = InProcessBroker(tmp_path, **props)
    b.call(CreateAclsRequest(creations=[creation()]), 3)
    b.close()
    b = InProcessBroker(tmp_path, **props)
    try:
        assert [r.resource_name for r in b.call(describe(), 3).resources] == ["orders"]
    finally:
        b.close()
