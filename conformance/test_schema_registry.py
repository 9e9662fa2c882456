"""The built-in schema registry against a real `python -m kafkapy serve` with
kafkapy.schema.registry.listener on: confluent-kafka's serializers round trip through it (Avro, JSON
Schema, Protobuf; auto-registration; evolution allowed and refused), SchemaRegistryClient (sync and
async) over every endpoint with Confluent's error codes, restart and SIGKILL keep subjects,
versions and ids, and malformed requests get their codes while nothing is half-written."""
from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
import uuid

import pytest

pytest.importorskip("confluent_kafka.schema_registry")
pytest.importorskip("avro")

from confluent_kafka import DeserializingConsumer, SerializingProducer  # noqa: E402
from confluent_kafka.error import ValueSerializationError  # noqa: E402
from confluent_kafka.schema_registry import (  # noqa: E402
    AsyncSchemaRegistryClient, Schema, SchemaReference, SchemaRegistryClient,
)
from confluent_kafka.schema_registry.error import SchemaRegistryError  # noqa: E402

from conformance.broker_process import free_port, start_broker  # noqa: E402

pytestmark = pytest.mark.timeout(90)

USER_V1 = {"type": "record", "name": "User", "namespace": "app",
           "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}]}
USER_V2 = dict(USER_V1, fields=USER_V1["fields"] + [{"name": "email", "type": ["null", "string"], "default": None}])
USER_BAD = dict(USER_V1, fields=USER_V1["fields"] + [{"name": "team", "type": "string"}])  # no default


@pytest.fixture(scope="module")
def registry():
    port, metrics_port = free_port(), free_port()
    with start_broker(overrides={"kafkapy.schema.registry.listener": f"http://127.0.0.1:{port}",
                                 "kafkapy.metrics.listener": f"http://127.0.0.1:{metrics_port}"}) as broker:
        broker.metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
        yield broker, f"http://127.0.0.1:{port}"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def http(url: str, method: str = "GET", body: bytes | None = None,
         content_type: str | None = "application/vnd.schemaregistry.v1+json") -> tuple[int, object]:
    headers = {"Content-Type": content_type} if content_type and body is not None else {}
    request = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        try:
            return exc.code, json.loads(raw)
        except ValueError:
            return exc.code, raw.decode(errors="replace")


def code_of(call) -> tuple[int, int]:
    with pytest.raises(SchemaRegistryError) as info:
        call()
    return info.value.http_status_code, info.value.error_code


def round_trip(broker, topic: str, value_serializer, value_deserializer, values: list, expect: int | None = None) -> list:
    producer = SerializingProducer({"bootstrap.servers": broker.bootstrap, "value.serializer": value_serializer})
    for value in values:
        producer.produce(topic, value=value)
    assert producer.flush(20) == 0
    consumer = DeserializingConsumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("g"),
                                      "auto.offset.reset": "earliest", "value.deserializer": value_deserializer})
    consumer.subscribe([topic])
    out = []
    try:
        for _ in range(200):
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                out.append(message.value())
                if len(out) == (expect or len(values)):
                    break
    finally:
        consumer.close()
    return out


def test_avro_round_trip_with_evolution_allowed_and_refused(registry):
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer

    broker, url = registry
    client = SchemaRegistryClient({"url": url})
    topic = unique("avro")
    values = [{"name": "ann", "age": 31}, {"name": "bob", "age": 42}]
    got = round_trip(broker, topic, AvroSerializer(client, json.dumps(USER_V1)), AvroDeserializer(client), values)
    assert got == values
    assert client.get_versions(f"{topic}-value") == [1]
    # a compatible evolution (new optional field with a default) is registered as version 2
    v2_values = [{"name": "cy", "age": 5, "email": "c@example.com"}]
    # a new group reads the old records (as written, with version 1) and the new one
    assert round_trip(broker, topic, AvroSerializer(client, json.dumps(USER_V2)), AvroDeserializer(client),
                      v2_values, expect=3) == values + v2_values
    assert client.get_versions(f"{topic}-value") == [1, 2]
    # a field without a default breaks BACKWARD: the producer's serializer gets 409
    producer = SerializingProducer({"bootstrap.servers": broker.bootstrap,
                                    "value.serializer": AvroSerializer(client, json.dumps(USER_BAD))})
    with pytest.raises(ValueSerializationError) as info:
        producer.produce(topic, value={"name": "x", "age": 1, "team": "t"})
    assert "409" in str(info.value) or "incompatible" in str(info.value)
    # with NONE it is accepted
    client.set_compatibility(f"{topic}-value", "NONE")
    producer = SerializingProducer({"bootstrap.servers": broker.bootstrap,
                                    "value.serializer": AvroSerializer(SchemaRegistryClient({"url": url}),
                                                                       json.dumps(USER_BAD))})
    producer.produce(topic, value={"name": "x", "age": 1, "team": "t"})
    assert producer.flush(10) == 0
    assert client.get_versions(f"{topic}-value") == [1, 2, 3]


def test_json_schema_round_trip_and_compatibility(registry):
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer

    broker, url = registry
    client = SchemaRegistryClient({"url": url})
    topic = unique("json")
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
              "properties": {"id": {"type": "integer"}, "item": {"type": "string"}}, "required": ["id"]}
    values = [{"id": 1, "item": "book"}, {"id": 2}]
    got = round_trip(broker, topic, JSONSerializer(json.dumps(schema), client),
                     JSONDeserializer(json.dumps(schema)), values)
    assert got == values
    subject = f"{topic}-value"
    narrowed = dict(schema, properties={"id": {"type": "string"}, "item": {"type": "string"}})
    assert not client.test_compatibility(subject, Schema(json.dumps(narrowed), "JSON"))
    assert code_of(lambda: client.register_schema(subject, Schema(json.dumps(narrowed), "JSON"))) == (409, 409)
    widened = dict(schema, properties={"id": {"type": "number"}, "item": {"type": "string"}})
    assert client.test_compatibility(subject, Schema(json.dumps(widened), "JSON"))
    assert client.register_schema(subject, Schema(json.dumps(widened), "JSON")) > 0


def _person_message_class():
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    file = descriptor_pb2.FileDescriptorProto(name=f"person_{uuid.uuid4().hex[:6]}.proto", package="test.sr",
                                              syntax="proto3")
    message = file.message_type.add(name="Person")
    message.field.add(name="name", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                      label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    message.field.add(name="id", number=2, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT32,
                      label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("test.sr.Person"))


def test_protobuf_round_trip(registry):
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer

    broker, url = registry
    client = SchemaRegistryClient({"url": url})
    person = _person_message_class()
    topic = unique("proto")
    values = [person(name="ann", id=1), person(name="bob", id=2)]
    got = round_trip(broker, topic, ProtobufSerializer(person, client, {"use.deprecated.format": False}),
                     ProtobufDeserializer(person, {"use.deprecated.format": False}), values)
    assert [(v.name, v.id) for v in got] == [("ann", 1), ("bob", 2)]
    subject = f"{topic}-value"
    assert client.get_latest_version(subject).schema.schema_type == "PROTOBUF"
    text = 'syntax = "proto3";\npackage test.sr;\nmessage Person { string name = 1; string id = 2; }\n'
    assert code_of(lambda: client.register_schema(subject, Schema(text, "PROTOBUF"))) == (409, 409)
    ok = 'syntax = "proto3";\npackage test.sr;\nmessage Person { string name = 1; int32 id = 2; bool vip = 3; }\n'
    assert client.register_schema(subject, Schema(ok, "PROTOBUF")) > 0
    assert code_of(lambda: client.register_schema(unique("p"), Schema("message {", "PROTOBUF"))) == (422, 42201)


def test_references_between_avro_schemas(registry):
    _, url = registry
    client = SchemaRegistryClient({"url": url})
    address_subject, user_subject = unique("address"), unique("user")
    address = {"type": "record", "name": "Address", "namespace": "app",
               "fields": [{"name": "city", "type": "string"}]}
    address_id = client.register_schema(address_subject, Schema(json.dumps(address), "AVRO"))
    user = {"type": "record", "name": "Person", "namespace": "app",
            "fields": [{"name": "name", "type": "string"}, {"name": "home", "type": "app.Address"}]}
    refs = [SchemaReference("app.Address", address_subject, 1)]
    user_id = client.register_schema(user_subject, Schema(json.dumps(user), "AVRO", refs))
    assert user_id != address_id
    fetched = client.get_schema(user_id)
    assert [(r.name, r.subject, r.version) for r in fetched.references] == [("app.Address", address_subject, 1)]
    assert client.get_referenced_by(address_subject, 1) == [user_id]
    # a referenced version cannot be deleted; an unknown reference is an invalid schema
    assert code_of(lambda: client.delete_version(address_subject, 1)) == (422, 42206)
    missing = [SchemaReference("app.Address", unique("nope"), 1)]
    assert code_of(lambda: client.register_schema(unique("u"), Schema(json.dumps(user), "AVRO", missing))) \
        == (422, 42201)
    # without the reference, the named type is unknown
    assert code_of(lambda: client.register_schema(unique("u"), Schema(json.dumps(user), "AVRO"))) == (422, 42201)


def test_client_endpoints_and_error_codes(registry):
    _, url = registry
    client = SchemaRegistryClient({"url": url})
    subject = unique("s")
    v1, v2 = Schema(json.dumps(USER_V1), "AVRO"), Schema(json.dumps(USER_V2), "AVRO")
    id1 = client.register_schema(subject, v1)
    assert client.register_schema(subject, v1) == id1  # the same schema again: same id, no new version
    id2 = client.register_schema(subject, v2)
    assert client.get_versions(subject) == [1, 2]
    assert client.get_version(subject, 1).schema_id == id1
    assert client.get_latest_version(subject).version == 2
    assert client.lookup_schema(subject, v1).version == 1
    assert subject in client.get_subjects_by_schema_id(id2)  # other tests register USER_V2 too
    assert (subject, 2) in [(v.subject, v.version) for v in client.get_schema_versions(id2)]
    assert set(client.get_schema_types()) == {"AVRO", "JSON", "PROTOBUF"}
    assert subject in client.get_subjects()
    # the same schema under another subject keeps its id
    other = unique("s")
    assert client.register_schema(other, v1) == id1
    # compatibility config: global and per subject, defaultToGlobal, delete
    assert client.get_compatibility() in ("BACKWARD", "NONE", "FULL")
    assert code_of(lambda: client.get_compatibility(subject)) == (404, 40408)
    client.set_compatibility(subject, "FULL_TRANSITIVE")
    assert client.get_compatibility(subject) == "FULL_TRANSITIVE"
    assert code_of(lambda: client.set_compatibility(subject, "SIDEWAYS")) == (422, 42203)
    client.delete_config(subject)
    assert code_of(lambda: client.get_compatibility(subject)) == (404, 40408)
    assert client.test_compatibility(subject, v2)
    assert not client.test_compatibility(subject, Schema(json.dumps(USER_BAD), "AVRO"))
    # modes
    assert client.get_global_mode() == "READWRITE"
    client.update_mode(subject, "READONLY")
    assert client.get_mode(subject) == "READONLY"
    assert code_of(lambda: client.register_schema(subject, Schema(json.dumps(USER_V2 | {"doc": "x"}), "AVRO"))) \
        == (422, 42205)
    assert client.delete_mode(subject) == "READONLY"
    assert code_of(lambda: client.update_mode(subject, "SOMETIMES")) == (422, 42204)
    # not found
    assert code_of(lambda: client.get_versions(unique("missing"))) == (404, 40401)
    assert code_of(lambda: client.get_version(subject, 99)) == (404, 40402)
    assert code_of(lambda: client.get_schema(987654)) == (404, 40403)
    assert code_of(lambda: client.lookup_schema(subject, Schema(json.dumps(USER_BAD), "AVRO"))) == (404, 40403)
    assert code_of(lambda: client.register_schema(unique("s"), Schema('{"type": "nope"}', "AVRO"))) == (422, 42201)
    assert http(f"{url}/subjects/{subject}/versions/0")[1]["error_code"] == 42202
    assert http(f"{url}/subjects/{subject}/versions/latest/schema")[1] == USER_V2
    # soft and permanent delete of a version and of the subject
    assert code_of(lambda: client.delete_version(subject, 1, permanent=True)) == (404, 40407)
    assert client.delete_version(subject, 1) == 1
    assert code_of(lambda: client.delete_version(subject, 1)) == (404, 40406)
    assert client.get_versions(subject) == [2]
    assert client.delete_version(subject, 1, permanent=True) == 1
    assert code_of(lambda: client.delete_subject(subject, permanent=True)) == (404, 40405)
    assert client.delete_subject(subject) == [2]
    assert code_of(lambda: client.delete_subject(subject)) == (404, 40404)
    assert subject not in client.get_subjects()
    assert client.delete_subject(subject, permanent=True) == [2]
    assert code_of(lambda: client.get_versions(subject)) == (404, 40401)
    # a re-registration after the permanent delete starts at version 1 and keeps the schema's id
    assert client.register_schema(subject, v2) == id2


def test_async_client(registry):
    _, url = registry

    async def run():
        client = AsyncSchemaRegistryClient({"url": url})
        subject = unique("async")
        schema_id = await client.register_schema(subject, Schema(json.dumps(USER_V1), "AVRO"))
        assert (await client.get_schema(schema_id)).schema_str == json.dumps(USER_V1)
        assert (await client.get_latest_version(subject)).schema_id == schema_id
        assert (await client.lookup_schema(subject, Schema(json.dumps(USER_V1), "AVRO"))).version == 1
        assert await client.get_versions(subject) == [1]
        await client.set_compatibility(subject, "NONE")
        assert await client.get_compatibility(subject) == "NONE"
        with pytest.raises(SchemaRegistryError) as info:
            await client.get_version(subject, 7)
        assert info.value.error_code == 40402
        assert await client.delete_subject(subject) == [1]

    asyncio.run(asyncio.wait_for(run(), 30))


@pytest.mark.parametrize("method,path,body,content_type,status,code", [
    ("POST", "/subjects/{s}/versions", b"{not json", None, 400, 400),
    ("POST", "/subjects/{s}/versions", b"[1, 2]", None, 422, 422),
    ("POST", "/subjects/{s}/versions", b'{"schema": 5}', None, 422, 422),
    ("POST", "/subjects/{s}/versions", b'{"schema": ""}', None, 422, 42201),
    ("POST", "/subjects/{s}/versions", b'{"schema": "{\\"type\\": \\"record\\"}"}', None, 422, 42201),
    ("POST", "/subjects/{s}/versions", b'{"schema": "\\"int\\"", "schemaType": "XML"}', None, 422, 42201),
    ("POST", "/subjects/{s}/versions", b'{"schema": "\\"int\\""}', "text/html", 415, 415),
    ("POST", "/subjects/{s}/versions", b'{"schema": "' + b"[" * 5000 + b'"}', None, 422, 42201),
    ("POST", "/subjects/{s}/versions", b'{"schema": "\\"int\\"", "references": [{"name": "x"}]}', None, 422, 42201),
    ("PUT", "/config", b'{"compatibility": 7}', None, 422, 42203),
    ("PUT", "/mode", b'{"mode": null}', None, 422, 42204),
    ("GET", "/subjects/{s}/versions/abc", None, None, 422, 42202),
    ("GET", "/nowhere", None, None, 404, 404),
    ("DELETE", "/schemas/types", None, None, 405, 405),
])
def test_bad_requests_get_confluents_codes_and_write_nothing(registry, method, path, body, content_type, status,
                                                              code):
    _, url = registry
    before = http(f"{url}/schemas?deleted=true")[1]
    got_status, answer = http(url + path.format(s=unique("bad")), method, body,
                              content_type or "application/vnd.schemaregistry.v1+json")
    assert (got_status, answer["error_code"]) == (status, code), answer
    assert isinstance(answer["message"], str) and "Traceback" not in answer["message"]
    assert http(f"{url}/schemas?deleted=true")[1] == before
    assert http(f"{url}/schemas/types")[0] == 200


def test_restart_and_sigkill_keep_subjects_versions_and_ids(registry):
    broker, url = registry
    client = SchemaRegistryClient({"url": url})
    subject = unique("durable")
    ids = [client.register_schema(subject, Schema(json.dumps(USER_V1), "AVRO")),
           client.register_schema(subject, Schema(json.dumps(USER_V2), "AVRO"))]
    client.delete_version(subject, 1)
    client.set_compatibility(subject, "FORWARD")
    before = http(f"{url}/schemas?deleted=true")[1]
    max_id = http(f"{url}/schemas/ids/{ids[0]}?fetchMaxId=true")[1]["maxId"]
    broker.restart()
    assert http(f"{url}/schemas?deleted=true")[1] == before
    broker.kill9()
    broker.start()
    fresh = SchemaRegistryClient({"url": url})
    assert http(f"{url}/schemas?deleted=true")[1] == before
    assert fresh.get_versions(subject) == [2]
    assert fresh.get_compatibility(subject) == "FORWARD"
    new_id = fresh.register_schema(unique("after"), Schema(json.dumps({"type": "enum", "name": "E",
                                                                        "symbols": ["A", "B"]}), "AVRO"))
    assert new_id > max_id  # ids are never handed out twice


def test_schemas_cli(registry, tmp_path):
    import subprocess
    import sys

    _, url = registry
    subject = unique("cli")
    v1, bad = tmp_path / "v1.avsc", tmp_path / "bad.avsc"
    v1.write_text(json.dumps(USER_V1))
    bad.write_text(json.dumps(USER_BAD))

    def cli(*args):
        done = subprocess.run([sys.executable, "-m", "kafkapy", "schemas", "--url", url, *args], capture_output=True,
                              text=True, timeout=30)
        return done.returncode, done.stdout, done.stderr

    code, out, _ = cli("register", subject, str(v1))
    assert code == 0 and json.loads(out)["version"] == 1
    code, out, _ = cli("list")
    assert code == 0 and subject in json.loads(out)
    code, out, _ = cli("get", subject, "--schema-only")
    assert code == 0 and json.loads(out) == USER_V1
    code, out, _ = cli("compat", subject, str(bad))
    assert code == 3 and json.loads(out)["is_compatible"] is False
    code, _, err = cli("register", subject, str(bad))
    assert code == 1 and "409" in err
    code, out, _ = cli("delete", subject)
    assert code == 0 and json.loads(out) == [1]
    code, _, err = cli("get", subject)
    assert code == 1 and "40401" in err


def test_registry_metrics_on_the_broker_metrics_endpoint(registry):
    broker, url = registry
    client = SchemaRegistryClient({"url": url})
    client.register_schema(unique("m"), Schema(json.dumps(USER_V1), "AVRO"))
    with urllib.request.urlopen(broker.metrics_url, timeout=10) as response:
        text = response.read().decode()
    subjects = [line for line in text.splitlines() if line.startswith("kafkapy_schema_registry_subjects ")]
    assert subjects and float(subjects[0].split()[1]) >= 1
    assert 'kafkapy_schema_registry_request_latency_seconds_count{route="POST /subjects/{subject}/versions"}' in text
    assert "kafkapy_schema_registry_registrations_total" in text


def test_fuzzed_requests_keep_the_registry_serving_and_write_nothing(registry):
    """Random methods, paths, content types and bodies (hypothesis): every answer is a status with a
    JSON error body of Confluent's shape (or a success), never a 500, and nothing is half-written."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    _, url = registry
    subject = unique("fuzz")
    assert http(f"{url}/subjects/{subject}/versions", "POST", json.dumps({"schema": json.dumps(USER_V1)}).encode())[0] \
        == 200
    before = http(f"{url}/schemas?deleted=true")[1]
    text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30)
    json_values = st.recursive(st.none() | st.booleans() | st.integers() | text,
                               lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
                               max_leaves=10)
    bodies = st.one_of(st.binary(max_size=200), json_values.map(lambda v: json.dumps(v).encode()),
                       st.fixed_dictionaries({"schema": st.one_of(text, json_values.map(json.dumps))},
                                             optional={"schemaType": text, "references": json_values,
                                                       "id": json_values}).map(lambda v: json.dumps(v).encode()))
    paths = st.sampled_from([f"/subjects/{subject}", f"/subjects/{subject}/versions/1",
                             f"/compatibility/subjects/{subject}/versions/latest", "/config", f"/mode/{subject}",
                             f"/schemas/ids/1", "/subjects/%00/versions", f"/subjects/{subject}/versions/-7"])

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(method=st.sampled_from(["POST", "PUT"]), path=paths, body=bodies,
           content_type=st.sampled_from(["application/vnd.schemaregistry.v1+json", "application/json", "text/plain",
                                         "application/x-www-form-urlencoded"]))
    def probe(method, path, body, content_type):
        if method == "PUT" and path in ("/config",) and body.startswith(b'{"schema"'):
            return  # a PUT /config with extra fields is a valid config change: it would write
        status, answer = http(url + path, method, body, content_type)
        assert status < 500, (method, path, body, status, answer)
        if status >= 400:
            assert isinstance(answer, dict) and isinstance(answer.get("error_code"), int), answer

    probe()
    # lookups and compatibility tests write nothing; registrations of valid bodies under the two
    # subjects the paths name (the fuzz subject and "\x00": `POST /subjects/%00/versions` with a
    # valid schema such as `[]`, an empty Avro union, is a registration) may have been accepted, so
    # compare only the other subjects' state
    fuzzed = {subject, "\x00"}
    after = http(f"{url}/schemas?deleted=true")[1]
    assert [s for s in after if s["subject"] not in fuzzed] == [s for s in before if s["subject"] not in fuzzed]
    assert http(f"{url}/schemas/types")[0] == 200


def test_huge_body_is_refused(registry):
    _, url = registry
    status, answer = http(f"{url}/subjects/{unique('huge')}/versions", "POST",
                          json.dumps({"schema": "x" * (5 * 1024 * 1024)}).encode())
    assert status == 413 and answer["error_code"] == 413


def test_console_pages_list_subjects_and_diff_versions(tmp_path):
    """The web console's Schemas pages (on when the console and the registry both are)."""
    registry_port, console_port = free_port(), free_port()
    with start_broker(overrides={"kafkapy.schema.registry.listener": f"http://127.0.0.1:{registry_port}",
                                 "kafkapy.console.listener": f"http://127.0.0.1:{console_port}"}):
        client = SchemaRegistryClient({"url": f"http://127.0.0.1:{registry_port}"})
        client.register_schema("orders-value", Schema(json.dumps(USER_V1), "AVRO"))
        client.register_schema("orders-value", Schema(json.dumps(USER_V2), "AVRO"))
        console = f"http://127.0.0.1:{console_port}"
        with urllib.request.urlopen(console + "/schemas", timeout=10) as response:
            page = response.read().decode()
        assert 'id="nav-schemas"' in page and "/schemas/orders-value" in page
        with urllib.request.urlopen(console + "/schemas/orders-value", timeout=10) as response:
            page = response.read().decode()
        assert 'class="diff-add">+' in page and "email" in page
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(console + "/schemas/nope", timeout=10)
        assert info.value.code == 404


def test_protobuf_serializer_registers_imports_as_references(registry):
    """A message importing google/protobuf/timestamp.proto: the serializer registers the import as a
    subject of its own and the message's schema with a reference to it (skip.known.types off)."""
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2

    _, url = registry
    pool = descriptor_pool.DescriptorPool()
    timestamp = descriptor_pb2.FileDescriptorProto()
    timestamp_pb2.DESCRIPTOR.CopyToProto(timestamp)
    pool.Add(timestamp)
    file = descriptor_pb2.FileDescriptorProto(name=f"event_{uuid.uuid4().hex[:6]}.proto", package="test.ev",
                                              syntax="proto3", dependency=["google/protobuf/timestamp.proto"])
    message = file.message_type.add(name="Event")
    message.field.add(name="at", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
                      type_name=".google.protobuf.Timestamp", label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    message.field.add(name="what", number=2, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                      label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    pool.Add(file)
    event_class = message_factory.GetMessageClass(pool.FindMessageTypeByName("test.ev.Event"))
    client = SchemaRegistryClient({"url": url})
    topic = unique("events")
    serializer = ProtobufSerializer(event_class, client, {"use.deprecated.format": False, "skip.known.types": False})
    event = event_class(what="deployed")
    event.at.seconds = 1_700_000_000
    data = serializer(event, SerializationContext(topic, MessageField.VALUE))
    references = client.get_latest_version(f"{topic}-value").schema.references
    assert [(r.name, r.subject) for r in references] == [("google/protobuf/timestamp.proto",) * 2]
    back = ProtobufDeserializer(event_class, {"use.deprecated.format": False})(
        data, SerializationContext(topic, MessageField.VALUE))
    assert (back.what, back.at.seconds) == ("deployed", 1_700_000_000)


def test_json_schema_references_are_resolved_for_compatibility(registry):
    """A JSON Schema `$ref` to another subject's schema (a reference) is compared through: person
    v2 points at address v2 whose `zip` changed type, so it cannot read person v1's data."""
    _, url = registry
    client = SchemaRegistryClient({"url": url})
    address_subject, person_subject = unique("address-json"), unique("person-json")
    client.set_compatibility(address_subject, "NONE")
    address = {"$id": "address.json", "type": "object", "properties": {"zip": {"type": "integer"}}}
    client.register_schema(address_subject, Schema(json.dumps(address), "JSON"))
    changed = dict(address, properties={"zip": {"type": "string"}})
    client.register_schema(address_subject, Schema(json.dumps(changed), "JSON"))
    person = json.dumps({"type": "object", "properties": {"home": {"$ref": "address.json"}}})
    client.register_schema(person_subject, Schema(person, "JSON", [SchemaReference("address.json", address_subject, 1)]))
    v2 = Schema(person, "JSON", [SchemaReference("address.json", address_subject, 2)])
    assert not client.test_compatibility(person_subject, v2)
    assert code_of(lambda: client.register_schema(person_subject, v2)) == (409, 409)
    # an open content model gaining a typed property is refused, as Confluent refuses it
    opened = json.dumps({"type": "object", "properties": {"home": {"$ref": "address.json"}, "n": {"type": "integer"}}})
    assert not client.test_compatibility(person_subject, Schema(
        opened, "JSON", [SchemaReference("address.json", address_subject, 1)]))


def test_protobuf_evolution_of_a_serializer_registered_descriptor(registry):
    """The serializer registers a FileDescriptorProto (a map field, an enum, reserved numbers); .proto
    text versions are then checked against it with Confluent's Protobuf rules."""
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    _, url = registry
    fd = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(name=f"stock_{uuid.uuid4().hex[:6]}.proto", package="test.st",
                                              syntax="proto3")
    file.enum_type.add(name="Unit").value.add(name="PIECE", number=0)
    stock = file.message_type.add(name="Stock")
    entry = stock.nested_type.add(name="LevelsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=fd.TYPE_STRING, label=fd.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=fd.TYPE_INT32, label=fd.LABEL_OPTIONAL)
    stock.field.add(name="levels", number=1, type=fd.TYPE_MESSAGE, type_name=".test.st.Stock.LevelsEntry",
                    label=fd.LABEL_REPEATED)
    stock.field.add(name="unit", number=2, type=fd.TYPE_ENUM, type_name=".test.st.Unit", label=fd.LABEL_OPTIONAL)
    stock.reserved_range.add(start=3, end=4)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    stock_class = message_factory.GetMessageClass(pool.FindMessageTypeByName("test.st.Stock"))
    client = SchemaRegistryClient({"url": url})
    topic = unique("stock")
    ProtobufSerializer(stock_class, client, {"use.deprecated.format": False})(
        stock_class(levels={"a": 1}), SerializationContext(topic, MessageField.VALUE))
    subject = f"{topic}-value"

    def text(body: str) -> Schema:
        return Schema(f'syntax = "proto3";\npackage test.st;\nenum Unit {{ PIECE = 0; BOX = 1; }}\n{body}\n', "PROTOBUF")

    same_map = "message Stock { reserved 3; map<string, int64> levels = 1; Unit unit = 2; string note = 4; }"
    assert client.test_compatibility(subject, text(same_map))
    assert not client.test_compatibility(subject, text(
        "message Stock { reserved 3; map<string, string> levels = 1; Unit unit = 2; }"))
    assert not client.test_compatibility(subject, text("message Stock { map<string, int32> levels = 1; "
                                                       "Unit unit = 2; int32 reused = 3; }"))
    assert client.register_schema(subject, text(same_map)) > 0


def test_normalize_with_the_client(registry):
    _, url = registry
    client = SchemaRegistryClient({"url": url})
    subject = unique("norm")
    spread = {"type": "record", "namespace": "app", "name": "N", "fields": [{"name": "a", "type": {"type": "long"}}]}
    schema_id = client.register_schema(subject, Schema(json.dumps(spread), "AVRO"), normalize_schemas=True)
    stored = json.loads(client.get_schema(schema_id).schema_str)
    assert stored["fields"] == [{"name": "a", "type": "long"}]
    other = {"type": "record", "name": "app.N", "fields": [{"type": "long", "name": "a"}]}
    assert client.lookup_schema(subject, Schema(json.dumps(other), "AVRO"), normalize_schemas=True).schema_id \
        == schema_id
    assert client.register_schema(subject, Schema(json.dumps(other), "AVRO")) == schema_id
