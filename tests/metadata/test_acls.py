"""ACL bindings and filters: Kafka's AclBindingFilter.matches semantics, validation, and storage in the metadata store."""
from __future__ import annotations

import pytest

from kafkapy.metadata import ChangeKind, EmbeddedMetadataStore
from kafkapy.metadata.acls import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    validate_filter,
    validate_new_acl,
)
from kafkapy.protocol.errors import ErrorCode, KafkaError

T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LIT, PRE, ANY_P, MATCH = PatternType.LITERAL, PatternType.PREFIXED, PatternType.ANY, PatternType.MATCH
READ, WRITE, ANY_OP = AclOperation.READ, AclOperation.WRITE, AclOperation.ANY
ALLOW, DENY, ANY_PERM = AclPermissionType.ALLOW, AclPermissionType.DENY, AclPermissionType.ANY


def acl(rtype=T, name="orders", ptype=LIT, principal="User:alice", host="*", op=READ, perm=ALLOW) -> AclBinding:
    return AclBinding(rtype, name, ptype, principal, host, op, perm)


def flt(rtype=ResourceType.ANY, name=None, ptype=ANY_P, principal=None, host=None, op=ANY_OP,
        perm=ANY_PERM) -> AclBindingFilter:
    return AclBindingFilter(rtype, name, ptype, principal, host, op, perm)


def invalid(fn, *args) -> str:
    with pytest.raises(KafkaError) as info:
        fn(*args)
    assert info.value.code == ErrorCode.INVALID_REQUEST
    return str(info.value)


# -- filter matching ------------------------------------------------------------------------------

def test_match_any_filter_matches_everything():
    for binding in (acl(), acl(G, "g", PRE), acl(C, "kafka-cluster", principal="User:*", op=WRITE, perm=DENY)):
        assert flt().matches(binding)


@pytest.mark.parametrize("acl_filter, expected", [
    (flt(T, "orders", LIT), True),
    (flt(T, "orders", PRE), False),           # a concrete pattern type must equal the ACL's
    (flt(T, "order", LIT), False),
    (flt(T, "orders", ANY_P), True),          # ANY pattern type: exact name, any pattern type
    (flt(G, "orders", ANY_P), False),
    (flt(T, None, LIT), True),
    (flt(principal="User:alice"), True),
    (flt(principal="User:bob"), False),
    (flt(principal="User:*"), False),         # filters compare principals literally
    (flt(host="*"), True),
    (flt(host="10.0.0.1"), False),
    (flt(op=READ), True),
    (flt(op=WRITE), False),
    (flt(op=AclOperation.ALL), False),
    (flt(perm=ALLOW), True),
    (flt(perm=DENY), False),
])
def test_filter_fields(acl_filter, expected):
    assert acl_filter.matches(acl()) is expected


@pytest.mark.parametrize("binding, expected", [
    (acl(name="orders", ptype=LIT), True),
    (acl(name="*", ptype=LIT), True),            # the literal wildcard applies to every name
    (acl(name="ord", ptype=PRE), True),          # a prefix that covers the name
    (acl(name="orders", ptype=PRE), True),
    (acl(name="orders-eu", ptype=PRE), False),
    (acl(name="other", ptype=LIT), False),
    (acl(name="*", ptype=PRE), False),           # "*" is only special for LITERAL patterns
])
def test_match_pattern_type_selects_every_pattern_covering_the_name(binding, expected):
    assert flt(T, "orders", MATCH).matches(binding) is expected


def test_match_without_a_name_matches_any_pattern():
    assert flt(T, None, MATCH).matches(acl(name="x", ptype=PRE))


# -- validation -----------------------------------------------------------------------------------

def test_valid_acls_pass():
    validate_new_acl(acl())
    validate_new_acl(acl(C, "kafka-cluster", op=AclOperation.ALTER))
    validate_new_acl(acl(ResourceType.TRANSACTIONAL_ID, "tx", PRE, "User:*", "10.0.0.1", WRITE, DENY))


def test_invalid_acls_are_rejected_with_kafkas_messages():
    assert invalid(validate_new_acl, acl(rtype=ResourceType.ANY)) == "Invalid resourceType ANY"
    assert invalid(validate_new_acl, acl(ptype=MATCH)) == "Invalid patternType MATCH"
    assert invalid(validate_new_acl, acl(ptype=ANY_P)) == "Invalid patternType ANY"
    assert invalid(validate_new_acl, acl(op=ANY_OP)) == "Invalid operation ANY"
    assert invalid(validate_new_acl, acl(perm=ANY_PERM)) == "Invalid permissionType ANY"
    assert invalid(validate_new_acl, acl(C, "my-cluster")) == \
        "The only valid name for the CLUSTER resource is kafka-cluster"
    assert invalid(validate_new_acl, acl(name="")) == "Invalid empty resource name"
    assert "no colon" in invalid(validate_new_acl, acl(principal="alice"))


def test_unknown_wire_codes_read_as_unknown_and_are_rejected():
    binding = AclBinding.of(99, "t", 3, "User:a", "*", 3, 3)
    assert binding.resource_type == ResourceType.UNKNOWN
    assert invalid(validate_new_acl, binding) == "Invalid resourceType UNKNOWN"
    assert invalid(validate_filter, AclBindingFilter.of(2, None, 0, None, None, 1, 1)) == "Unknown patternFilter."
    assert invalid(validate_filter, AclBindingFilter.of(2, None, 1, None, None, 1, 42)) == "Unknown entryFilter."
    validate_filter(flt())


def test_json_round_trip_and_kafka_style_str():
    binding = acl(G, "grp", PRE, "User:bob", "1.2.3.4", AclOperation.DESCRIBE, DENY)
    assert AclBinding.from_json(binding.to_json()) == binding
    assert str(binding) == ("(pattern=ResourcePattern(resourceType=GROUP, name=grp, patternType=PREFIXED), "
                            "entry=(principal=User:bob, host=1.2.3.4, operation=DESCRIBE, permissionType=DENY))")


# -- storage ------------------------------------------------------------------------------------------

@pytest.fixture
def store(tmp_path):
    s = EmbeddedMetadataStore(tmp_path)
    yield s
    s.close()


def test_store_keeps_acls_once_and_across_reopen(tmp_path, store):
    changes = []
    store.add_listener(changes.append)
    store.create_acls([acl(), acl(), acl(op=WRITE)])
    store.create_acls([acl()])                       # already stored: no change
    assert [c.kind for c in changes] == [ChangeKind.ACLS_CHANGED]
    assert store.describe_acls(flt()) == [acl(), acl(op=WRITE)]
    reopened = EmbeddedMetadataStore(tmp_path)
    assert reopened.describe_acls(flt()) == [acl(), acl(op=WRITE)]
    assert reopened.describe_acls(flt(op=WRITE)) == [acl(op=WRITE)]


def test_delete_reports_each_filters_matches_against_the_acls_before_the_request(tmp_path, store):
    store.create_acls([acl(), acl(op=WRITE), acl(name="other")])
    matches = store.delete_acls([flt(T, "orders", LIT), flt(op=WRITE), flt(principal="User:nobody")])
    assert matches == [[acl(), acl(op=WRITE)], [acl(op=WRITE)], []]
    assert store.describe_acls(flt()) == [acl(name="other")]
    assert EmbeddedMetadataStore(tmp_path).describe_acls(flt()) == [acl(name="other")]
