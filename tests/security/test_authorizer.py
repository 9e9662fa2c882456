"""kafkapy.security.authorizer: Kafka's AclAuthorizer decisions, by example and by property."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.broker.config import BrokerConfig, ConfigError
from kafkapy.metadata.acls import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from kafkapy.security.authorizer import AclAuthorizer, _AclIndex, create_authorizer, parse_super_users
from kafkapy.security.principal import KafkaPrincipal

Op = AclOperation
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
ALICE, BOB = KafkaPrincipal.user("alice"), KafkaPrincipal.user("bob")
HOST = "10.0.0.1"


def acl(name, op, perm=ALLOW, principal="User:alice", host="*", pattern=LIT, rtype=TOPIC) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def authz(*acls, super_users=(), allow_if_none=False) -> AclAuthorizer:
    return AclAuthorizer(frozenset(super_users), allow_if_none, lambda: list(acls))


def test_no_acl_denies_by_default_and_allows_with_allow_everyone():
    assert not authz().authorize(ALICE, HOST, Op.READ, TOPIC, "t")
    assert authz(allow_if_none=True).authorize(ALICE, HOST, Op.READ, TOPIC, "t")
    # an ACL on the resource for someone else: "no ACL found" no longer applies
    a = authz(acl("t", Op.READ, principal="User:bob"), allow_if_none=True)
    assert not a.authorize(ALICE, HOST, Op.READ, TOPIC, "t")
    assert a.authorize(BOB, HOST, Op.READ, TOPIC, "t")
    assert a.authorize(ALICE, HOST, Op.READ, TOPIC, "other")


def test_super_users_pass_even_a_deny():
    a = authz(acl("*", Op.ALL, DENY, principal="User:*"), super_users={"User:admin"})
    assert a.authorize(KafkaPrincipal.user("admin"), HOST, Op.ALTER, TOPIC, "t")
    assert not a.authorize(ALICE, HOST, Op.ALTER, TOPIC, "t")


def test_literal_wildcard_and_prefixed_patterns():
    a = authz(acl("orders", Op.READ), acl("pay-", Op.WRITE, pattern=PRE), acl("*", Op.DESCRIBE, rtype=GROUP))
    assert a.authorize(ALICE, HOST, Op.READ, TOPIC, "orders")
    assert not a.authorize(ALICE, HOST, Op.READ, TOPIC, "orders2")
    assert a.authorize(ALICE, HOST, Op.WRITE, TOPIC, "pay-eu")
    assert a.authorize(ALICE, HOST, Op.WRITE, TOPIC, "pay-")
    assert not a.authorize(ALICE, HOST, Op.WRITE, TOPIC, "pay")
    assert a.authorize(ALICE, HOST, Op.DESCRIBE, GROUP, "any-group")
    assert not a.authorize(ALICE, HOST, Op.DESCRIBE, TOPIC, "any-topic")


def test_deny_wins_over_allow_whatever_the_pattern():
    a = authz(acl("*", Op.ALL), acl("secret-", Op.READ, DENY, pattern=PRE))
    assert a.authorize(ALICE, HOST, Op.READ, TOPIC, "public")
    assert not a.authorize(ALICE, HOST, Op.READ, TOPIC, "secret-1")
    # DENY READ does not deny DESCRIBE (only DENY DESCRIBE or DENY ALL would)
    assert a.authorize(ALICE, HOST, Op.DESCRIBE, TOPIC, "secret-1")
    b = authz(acl("t", Op.READ), acl("t", Op.ALL, DENY, principal="User:*"))
    assert not b.authorize(ALICE, HOST, Op.READ, TOPIC, "t")


def test_hosts_and_wildcard_principal():
    a = authz(acl("t", Op.READ, host="10.0.0.1"), acl("u", Op.READ, principal="User:*"))
    assert a.authorize(ALICE, "10.0.0.1", Op.READ, TOPIC, "t")
    assert not a.authorize(ALICE, "10.0.0.2", Op.READ, TOPIC, "t")
    assert a.authorize(BOB, "10.0.0.2", Op.READ, TOPIC, "u")
    deny_host = authz(acl("t", Op.READ), acl("t", Op.READ, DENY, host="10.0.0.9"))
    assert deny_host.authorize(ALICE, "10.0.0.1", Op.READ, TOPIC, "t")
    assert not deny_host.authorize(ALICE, "10.0.0.9", Op.READ, TOPIC, "t")


@pytest.mark.parametrize("granted, asked, allowed", [
    (Op.READ, Op.DESCRIBE, True), (Op.WRITE, Op.DESCRIBE, True), (Op.DELETE, Op.DESCRIBE, True),
    (Op.ALTER, Op.DESCRIBE, True), (Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS, True), (Op.ALL, Op.CLUSTER_ACTION, True),
    (Op.CREATE, Op.DESCRIBE, False), (Op.DESCRIBE, Op.READ, False), (Op.WRITE, Op.READ, False),
    (Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, False), (Op.ALTER, Op.ALTER_CONFIGS, False),
    (Op.WRITE, Op.IDEMPOTENT_WRITE, False), (Op.ALTER_CONFIGS, Op.DESCRIBE, False),
])
def test_implied_operations_are_aclauthorizers(granted, asked, allowed):
    assert authz(acl("kafka-cluster", granted, rtype=CLUSTER)).authorize(
        ALICE, HOST, asked, CLUSTER, "kafka-cluster") is allowed


def test_authorized_operations_bit_field():
    a = authz(acl("t", Op.READ), acl("t", Op.ALTER_CONFIGS))
    bits = a.authorized_operations(ALICE, HOST, TOPIC, "t")
    assert bits == (1 << Op.READ) | (1 << Op.DESCRIBE) | (1 << Op.ALTER_CONFIGS) | (1 << Op.DESCRIBE_CONFIGS)


def test_authorize_by_resource_type_as_kafka():
    # WRITE on some topic lets an idempotent producer in without IDEMPOTENT_WRITE
    assert authz(acl("t", Op.WRITE)).authorize_by_resource_type(ALICE, HOST, Op.WRITE, TOPIC)
    assert not authz(acl("t", Op.READ)).authorize_by_resource_type(ALICE, HOST, Op.WRITE, TOPIC)
    assert not authz(acl("t", Op.WRITE), acl("*", Op.WRITE, DENY)).authorize_by_resource_type(
        ALICE, HOST, Op.WRITE, TOPIC)
    assert not authz(acl("ab", Op.WRITE), acl("a", Op.WRITE, DENY, pattern=PRE)).authorize_by_resource_type(
        ALICE, HOST, Op.WRITE, TOPIC)
    assert authz(acl("ab", Op.WRITE, pattern=PRE), acl("abc", Op.WRITE, DENY, pattern=PRE)).authorize_by_resource_type(
        ALICE, HOST, Op.WRITE, TOPIC)
    assert authz(super_users={"User:alice"}).authorize_by_resource_type(ALICE, HOST, Op.WRITE, TOPIC)


def test_acl_changes_are_seen_after_invalidate():
    acls: list[AclBinding] = []
    a = AclAuthorizer(frozenset(), False, lambda: list(acls))
    assert not a.authorize(ALICE, HOST, Op.READ, TOPIC, "t")
    acls.append(acl("t", Op.READ))
    assert not a.authorize(ALICE, HOST, Op.READ, TOPIC, "t")  # cached until the store says it changed
    a.invalidate()
    assert a.authorize(ALICE, HOST, Op.READ, TOPIC, "t")


def test_a_change_during_indexing_is_not_lost():
    """A ZooKeeper notification (another thread) arriving while the index is built from older ACLs."""
    acls: list[AclBinding] = []
    calls = []

    def load():
        snapshot = list(acls)
        if not calls:  # the first load reads, then the ACLs change and the store notifies
            acls.append(acl("t", Op.READ))
            a.invalidate()
        calls.append(1)
        return snapshot

    a = AclAuthorizer(frozenset(), False, load)
    assert not a.authorize(ALICE, HOST, Op.READ, TOPIC, "t")  # decided on what it read
    assert a.authorize(ALICE, HOST, Op.READ, TOPIC, "t")  # the stale index was not kept
    assert len(calls) == 2


def test_config():
    assert parse_super_users(" User:a ; User:b;") == {"User:a", "User:b"}
    with pytest.raises(ConfigError):
        parse_super_users("alice")
    with pytest.raises(ConfigError, match="super.users"):
        BrokerConfig({"log.dirs": "/tmp/unused", "super.users": "admin"})
    assert create_authorizer({"authorizer.class.name": ""}.get, None) is None


def test_an_unknown_authorizer_class_is_served_as_aclauthorizer_with_a_warning(caplog):
    class Store:
        def add_listener(self, listener):
            pass

        def describe_acls(self, acl_filter):
            return []

    config = {"authorizer.class.name": "com.example.MyAuthorizer", "super.users": "",
              "allow.everyone.if.no.acl.found": False}
    a = create_authorizer(config.get, Store())
    assert "com.example.MyAuthorizer" in caplog.text
    assert not a.authorize(ALICE, HOST, Op.READ, TOPIC, "t")  # deny by default: never open


# -- properties -----------------------------------------------------------------------------------
names = st.sampled_from(["a", "ab", "abc", "b", "*", "kafka-cluster"])
principals = st.sampled_from(["User:alice", "User:bob", "User:*"])
hosts = st.sampled_from(["*", "10.0.0.1", "10.0.0.2"])
ops = st.sampled_from([op for op in Op if op not in (Op.UNKNOWN, Op.ANY)])
rtypes = st.sampled_from([TOPIC, GROUP, CLUSTER])
bindings = st.builds(AclBinding, rtypes, names, st.sampled_from([LIT, PRE]), principals, hosts, ops,
                     st.sampled_from([ALLOW, DENY]))
asked_names = st.sampled_from(["a", "ab", "abc", "abd", "b", "c"])


@settings(max_examples=300, deadline=None)
@given(st.lists(bindings, max_size=12), rtypes, asked_names)
def test_index_selects_what_a_match_filter_selects(acls, rtype, name):
    """The index's matching ACLs are exactly those Kafka's MATCH filter (DescribeAcls) selects."""
    index = _AclIndex(acls)
    match = AclBindingFilter(rtype, name, PatternType.MATCH, None, None, Op.ANY, AclPermissionType.ANY)
    expected = sorted((a.principal, a.host, a.operation, a.permission_type == ALLOW) for a in acls if match.matches(a))
    got = sorted((e.principal, e.host, e.operation, e.allow) for e in index.matching(rtype, name))
    assert got == expected


def _reference(acls, principal, host, op, rtype, name, allow_if_none):
    """AclAuthorizer.authorizeAction written out plainly over the list of ACLs."""
    match = AclBindingFilter(rtype, name, PatternType.MATCH, None, None, Op.ANY, AclPermissionType.ANY)
    relevant = [a for a in acls if match.matches(a)]
    if not relevant:
        return allow_if_none
    mine = [a for a in relevant if a.principal in (principal, "User:*") and a.host in (host, "*")]
    if any(a.permission_type == DENY and a.operation in (op, Op.ALL) for a in mine):
        return False
    allow_ops = {op, Op.ALL}
    if op == Op.DESCRIBE:
        allow_ops |= {Op.READ, Op.WRITE, Op.DELETE, Op.ALTER}
    if op == Op.DESCRIBE_CONFIGS:
        allow_ops |= {Op.ALTER_CONFIGS}
    return any(a.permission_type == ALLOW and a.operation in allow_ops for a in mine)


@settings(max_examples=500, deadline=None)
@given(st.lists(bindings, max_size=12), rtypes, asked_names, ops, st.sampled_from(["10.0.0.1", "10.0.0.2"]),
       st.booleans())
def test_decisions_match_aclauthorizer(acls, rtype, name, op, host, allow_if_none):
    a = authz(*acls, allow_if_none=allow_if_none)
    assert a.authorize(ALICE, host, op, rtype, name, log_if_denied=False) == _reference(
        acls, "User:alice", host, op, rtype, name, allow_if_none)


@settings(max_examples=200, deadline=None)
@given(st.lists(bindings, max_size=10), rtypes, asked_names, ops)
def test_a_matching_deny_all_always_denies_and_super_users_always_pass(acls, rtype, name, op):
    denied = authz(*acls, acl(name, Op.ALL, DENY, principal="User:*", rtype=rtype), super_users={"User:root"})
    assert not denied.authorize(ALICE, HOST, op, rtype, name, log_if_denied=False)
    assert denied.authorize(KafkaPrincipal.user("root"), HOST, op, rtype, name)
