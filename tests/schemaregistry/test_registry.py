"""The registry's operations on its in-memory state (no store: records apply at once), the records
they write (Confluent's `_schemas` format), and bodies from hypothesis that never break it."""
from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("avro")

from kafkapy.schemaregistry.errors import RegistryError  # noqa: E402
from kafkapy.schemaregistry.registry import Registry, parse_version  # noqa: E402

V1 = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})
V2 = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"},
                                                           {"name": "b", "type": "int", "default": 0}]})
BAD = json.dumps({"type": "record", "name": "R", "fields": [{"name": "c", "type": "int"}]})


class Recording(Registry):
    """A registry whose writes are kept (key, value) as the store would write them."""

    def __init__(self):
        super().__init__()
        self.records = []

    async def _append(self, key, value):
        self.records.append((key, value))
        self.apply(json.loads(json.dumps(key)), json.loads(json.dumps(value)))


def run(coro):
    return asyncio.run(coro)


def code(coro) -> int:
    with pytest.raises(RegistryError) as info:
        run(coro)
    return info.value.error_code


def test_register_writes_confluents_schema_record_and_rebuilds_from_records():
    registry = Recording()
    body = run(registry.register("s", {"schema": V1}))
    assert (body["id"], body["version"]) == (1, 1)
    key, value = registry.records[-1]
    assert key == {"keytype": "SCHEMA", "subject": "s", "version": 1, "magic": 1}
    assert value["subject"] == "s" and value["id"] == 1 and value["schema"] == V1 and value["deleted"] is False
    assert "schemaType" not in value  # AVRO is the default, as Confluent writes it
    run(registry.register("s", {"schema": V2}))
    run(registry.set_config("s", {"compatibility": "full"}))
    run(registry.delete_version("s", 1, False))
    replayed = Registry()
    for key, value in registry.records:
        replayed.apply(key, value)
    assert [v.version for v in replayed.live_versions("s")] == [2]
    assert replayed.compatibility_of("s") == "FULL" and replayed.max_id == 2


def test_same_schema_same_id_and_version_no_record():
    registry = Recording()
    run(registry.register("s", {"schema": V1}))
    count = len(registry.records)
    again = run(registry.register("s", {"schema": json.dumps(json.loads(V1), indent=2)}))
    assert again["version"] == 1 and len(registry.records) == count
    assert run(registry.register("t", {"schema": V1}))["id"] == 1


def test_incompatible_is_409_and_writes_nothing():
    registry = Recording()
    run(registry.register("s", {"schema": V1}))
    count = len(registry.records)
    assert code(registry.register("s", {"schema": BAD})) == 409
    assert len(registry.records) == count


def test_transitive_levels_check_every_version():
    registry = Recording()
    run(registry.set_config("s", {"compatibility": "NONE"}))
    run(registry.register("s", {"schema": V1}))
    run(registry.register("s", {"schema": BAD}))
    third = json.dumps({"type": "record", "name": "R", "fields": [{"name": "c", "type": "int"},
                                                                  {"name": "d", "type": "int", "default": 1}]})
    run(registry.set_config("s", {"compatibility": "BACKWARD"}))
    run(registry.set_config("s", {"compatibility": "BACKWARD_TRANSITIVE"}))
    assert code(registry.register("s", {"schema": third})) == 409  # against version 1, field a is gone: no
    run(registry.set_config("s", {"compatibility": "BACKWARD"}))
    assert run(registry.register("s", {"schema": third}))["version"] == 3


def test_ids_are_not_reused_after_a_permanent_delete():
    registry = Recording()
    run(registry.register("s", {"schema": V1}))
    run(registry.delete_subject("s", False))
    run(registry.delete_subject("s", True))
    assert registry.max_id == 1
    assert run(registry.register("t", {"schema": V2}))["id"] == 2


def test_import_mode_takes_explicit_ids():
    registry = Recording()
    run(registry.set_mode(None, "IMPORT", False))
    assert code(registry.register("s", {"schema": V1})) == 42205
    assert run(registry.register("s", {"schema": V1, "id": 40, "version": 3}))["id"] == 40
    assert registry.subjects["s"][3].id == 40
    assert code(registry.register("t", {"schema": V2, "id": 40})) == 42205  # another schema under id 40
    run(registry.set_mode(None, "READWRITE", False))
    assert run(registry.register("u", {"schema": V2}))["id"] == 41


def test_metadata_and_rule_set_are_stored_and_returned():
    registry = Recording()
    metadata = {"properties": {"owner": "team-a"}}
    rule_set = {"domainRules": [{"name": "r", "kind": "CONDITION", "mode": "WRITE", "type": "CEL", "expr": "true"}]}
    body = run(registry.register("s", {"schema": V1, "metadata": metadata, "ruleSet": rule_set}))
    assert body["metadata"] == metadata and body["ruleSet"] == rule_set
    assert registry.records[-1][1]["metadata"] == metadata


@pytest.mark.parametrize("text,expected", [("1", 1), ("latest", -1), ("-1", -1), (2**31 - 1, 2**31 - 1)])
def test_versions(text, expected):
    assert parse_version(text) == expected


@pytest.mark.parametrize("text", ["0", "-2", "x", str(2**31), "1.5", ""])
def test_invalid_versions(text):
    with pytest.raises(RegistryError) as info:
        parse_version(text)
    assert info.value.error_code == 42202


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                                      max_size=4), max_leaves=20)
bodies = st.fixed_dictionaries({}, optional={
    "schema": st.one_of(st.text(max_size=40), json_values.map(json.dumps), json_values),
    "schemaType": st.one_of(st.sampled_from(["AVRO", "JSON", "PROTOBUF", "avro", "XML"]), json_values),
    "references": json_values, "id": json_values, "version": json_values,
    "metadata": json_values, "ruleSet": json_values})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=bodies)
def test_any_body_gets_an_answer_or_a_registry_error(body):
    registry = Recording()
    run(registry.register("base", {"schema": V1}))
    before = list(registry.records)
    try:
        answer = run(registry.register("s", body))
    except RegistryError as exc:
        assert 400 <= exc.status < 500 and exc.error_code
        assert registry.records == before  # nothing half-written
    else:
        assert answer["id"] >= 1 and len(registry.records) == len(before) + 1
    for call in (lambda: registry.lookup("base", body), lambda: registry.test_compatibility("base", "1", body, True)):
        try:
            call()
        except RegistryError as exc:
            assert 400 <= exc.status < 500


SPREAD = json.dumps({"type": "record", "namespace": "n", "name": "R",
                     "fields": [{"type": {"type": "int"}, "name": "a"}]})


def test_normalize_stores_avros_normal_form_and_equal_forms_are_one_schema():
    r = Recording()
    body = {"schema": SPREAD}
    first = run(r.register("s", body, normalize=True))
    stored = json.loads(r.records[-1][1]["schema"])
    assert stored == {"type": "record", "name": "R", "namespace": "n", "fields": [{"name": "a", "type": "int"}]}
    # the same schema written otherwise is the same version, with or without normalize
    same = json.dumps({"type": "record", "name": "n.R", "fields": [{"name": "a", "type": "int"}]})
    assert run(r.register("s", {"schema": same}))["id"] == first["id"]
    assert r.lookup("s", {"schema": same})["version"] == 1
    assert len(r.records) == 1


def test_normalize_from_the_subject_config():
    r = Recording()
    run(r.set_config("j", {"compatibility": "NONE", "normalize": True}))
    run(r.register("j", {"schemaType": "JSON", "schema": '{"type": "object",  "properties": {"b": {}, "a": {}}}'}))
    assert r.records[-1][1]["schema"] == '{"properties":{"a":{},"b":{}},"type":"object"}'
    run(r.register("k", {"schemaType": "JSON", "schema": '{"type": "string"}'}))
    assert r.records[-1][1]["schema"] == '{"type": "string"}'
