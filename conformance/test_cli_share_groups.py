"""`kafkapy share-groups list|describe|reset-offsets|delete-offsets|delete` against a real kafkapy
process, with a group made by confluent-kafka's ShareConsumer (the columns of kafka-share-groups.sh:
GROUP, TOPIC, PARTITION, START-OFFSET, LAG; --members; --state), and the console's share groups table."""
from __future__ import annotations

import re
import time
import urllib.request

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
if not hasattr(confluent_kafka, "ShareConsumer"):
    pytest.skip("confluent-kafka without ShareConsumer (2.15+ needed)", allow_module_level=True)

from confluent_kafka import Producer, ShareConsumer  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from conformance.broker_process import free_port, start_broker  # noqa: E402
from conformance.test_cli import cli, ok, one_line_error  # noqa: E402

pytestmark = pytest.mark.timeout(120)

TOPIC, GROUP = "cli-share-t", "cli-share-g"


@pytest.fixture(scope="module")
def broker():
    with start_broker(overrides={"offsets.topic.replication.factor": "1",
                                 "share.coordinator.state.topic.replication.factor": "1",
                                 "share.coordinator.state.topic.num.partitions": "3",
                                 "kafkapy.console.listener": f"http://127.0.0.1:{free_port()}"}) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(15)
        producer = Producer({"bootstrap.servers": b.bootstrap})
        for i in range(10):
            producer.produce(TOPIC, value=b"v%d" % i)
        assert producer.flush(15) == 0
        yield b


def _rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if line.strip()]


def _until(check, timeout_s: float = 20.0):
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.3)


def test_share_groups_commands(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.incremental_alter_configs([ConfigResource(ResourceType.GROUP, GROUP, incremental_configs=[
            ConfigEntry("share.auto.offset.reset", "earliest",
                        incremental_operation=AlterConfigOpType.SET)])]).values():
        future.result(15)
    consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": GROUP, "client.id": "cli-share-c"})
    consumer.subscribe([TOPIC])
    try:
        got = 0
        deadline = time.monotonic() + 30
        while got < 10 and time.monotonic() < deadline:
            got += len([m for m in consumer.poll(0.5) or [] if m.error() is None])
        assert got == 10
        consumer.poll(0.5)  # the implicit acknowledgements of the 10 records go out
        assert ok(cli(broker, "share-groups", "list")).out.split() == [GROUP]
        assert _rows(ok(cli(broker, "share-groups", "list", "--state")).out) == [["GROUP", "STATE"],
                                                                                 [GROUP, "Stable"]]
        [header, row] = _rows(ok(cli(broker, "share-groups", "describe", GROUP, "--members")).out)
        assert header == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]
        assert (row[0], row[3], row[4], row[5]) == (GROUP, "cli-share-c", "1", f"{TOPIC}:0")
        [header, row] = _rows(ok(cli(broker, "share-groups", "describe", GROUP, "--state")).out)
        assert header[:2] == ["GROUP", "COORDINATOR"] and header[-2:] == ["STATE", "#MEMBERS"]
        assert (row[0], row[-2], row[-1]) == (GROUP, "Stable", "1")
        def described():  # the acknowledgements have reached the broker: start offset 10, lag 0
            rows = _rows(ok(cli(broker, "share-groups", "describe", "--group", GROUP)).out)
            return rows if rows[1][3:] == ["10", "0"] else None

        offsets = _until(described)
        assert offsets == [["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"], [GROUP, TOPIC, "0", "10", "0"]]
        # the console's groups page has a share groups table: one row per share-partition led here
        with urllib.request.urlopen(broker.overrides["kafkapy.console.listener"] + "/groups", timeout=10) as page:
            html = page.read().decode()
        table = html[html.index('id="share-groups"'):].split("</table>")[0]
        cells = [c.strip() for c in re.findall(r"<td[^>]*>([^<]*)</td>", table)]
        assert cells == [GROUP, "Stable", "1", f"{TOPIC}-0", "10", "0", "0", "0", "0"]
        # an active group's offsets are not changed
        one_line_error(cli(broker, "share-groups", "reset-offsets", GROUP, "--topic", TOPIC, "--to-earliest",
                           "--execute"), 1, "active members")
    finally:
        consumer.close()
    assert _until(lambda: _rows(ok(cli(broker, "share-groups", "list", "--state")).out)[1:] == [[GROUP, "Empty"]])
    preview = ok(cli(broker, "share-groups", "reset-offsets", GROUP, "--topic", TOPIC, "--to-offset", "4"))
    assert _rows(preview.out) == [["GROUP", "TOPIC", "PARTITION", "NEW-START-OFFSET"], [GROUP, TOPIC, "0", "4"]]
    assert "preview" in preview.err
    assert _rows(ok(cli(broker, "share-groups", "describe", GROUP)).out)[1] == [GROUP, TOPIC, "0", "10", "0"]
    ok(cli(broker, "share-groups", "reset-offsets", GROUP, "--topic", TOPIC, "--to-offset", "4", "--execute"))
    described = ok(cli(broker, "share-groups", "describe", GROUP, "--format", "json")).json()
    assert [(p["topic"], p["partition"], p["start_offset"]) for p in described[0]["partitions"]] == [(TOPIC, 0, 4)]
    assert "no active members" in cli(broker, "share-groups", "describe", GROUP).err
    deleted = ok(cli(broker, "share-groups", "delete-offsets", "--group", GROUP, "--topic", TOPIC))
    assert _rows(deleted.out) == [["TOPIC", "STATUS"], [TOPIC, "Successful"]]
    ok(cli(broker, "share-groups", "delete", GROUP))
    assert ok(cli(broker, "share-groups", "list")).out.split() == []
    one_line_error(cli(broker, "share-groups", "delete", GROUP), 1, "GROUP_ID_NOT_FOUND")
    one_line_error(cli(broker, "share-groups", "describe", "no-such-share-group"), 1, "GROUP_ID_NOT_FOUND")
