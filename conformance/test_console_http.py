"""The web console over plain HTTP against a real kafkapy process: every page answers, the console
is read-only unless kafkapy.console.writes.enable is set, and bad input gets a clear 4xx message
(never a traceback)."""
from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request

import pytest

from conformance.broker_process import free_port
from conformance.console_workload import (
    COMMITTED_P0, ORDERS, ORDERS_APP, ORDERS_P0_RECORDS, console_broker, load_workload,
)

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def console():
    # the metrics endpoint on: the broker then tracks each consumer's fetch position
    broker, url = console_broker(writes=False, extra={"kafkapy.metrics.listener": f"http://127.0.0.1:{free_port()}"})
    try:
        load_workload(broker.bootstrap, big=False)
        yield url
    finally:
        broker.close()


def test_topic_page_shows_fetch_positions_of_consumers_that_do_not_commit(console):
    status, body, _ = fetch(console + f"/topics/{ORDERS}")
    assert status == 200 and 'id="fetchers"' in body
    row = re.search(r"<tr><td>spark-like</td><td>[^<]*</td><td class=\"num\">0</td>"
                    r"<td class=\"num\">(\d+)</td>\s*<td class=\"num\">(\d+)</td>", body)
    assert row, body[body.index('id="fetchers"'):][:1500]
    position, lag = int(row.group(1)), int(row.group(2))
    assert position + lag == ORDERS_P0_RECORDS and position >= 20  # 20, or 30 once it fetched again


def fetch(url: str, data: dict | None = None, headers: dict | None = None) -> tuple[int, str, dict]:
    body = urllib.parse.urlencode(data).encode() if data is not None else None
    request = urllib.request.Request(url, data=body, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode(), dict(response.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(), dict(exc.headers)


@pytest.mark.parametrize("path", [
    "/", "/topics", "/topics?q=ord", f"/topics/{ORDERS}", f"/topics/{ORDERS}/messages",
    f"/topics/{ORDERS}/messages?partition=0&offset=3&format=hex", f"/topics/{ORDERS}/messages?from=last&limit=5",
    f"/topics/{ORDERS}/messages?partition=0&q=trace-0007", "/groups", f"/groups/{ORDERS_APP}", "/requests",
    "/static/console.css", "/static/console.js"])
def test_every_page_answers(console, path):
    status, body, headers = fetch(console + path)
    assert status == 200, body
    assert "Traceback" not in body
    assert "Server-Timing" in headers


def test_message_api_and_export(console):
    status, body, _ = fetch(console + f"/api/topics/{ORDERS}/messages?partition=0&offset=28")
    assert status == 200
    page = json.loads(body)
    assert [r["offset"] for r in page["records"]] == [28, 29] and page["next_offset"] == 30
    assert page["records"][0]["value_kind"] == "json"
    assert page["records"][0]["headers"][0] == {"key": "trace-id", "value": "trace-0028"}
    status, body, headers = fetch(console + f"/topics/{ORDERS}/messages/export?partition=1&limit=2")
    assert status == 200 and "attachment" in headers["Content-Disposition"]
    exported = json.loads(body)
    assert len(exported) == 2 and exported[0]["value"] is None
    assert exported[0]["value_base64"] == "AAFiaW5hcnn/"


def test_read_only_refuses_reset_but_previews(console):
    form = {"strategy": "earliest", "topic": ORDERS, "value": "", "execute": "1"}
    status, body, _ = fetch(console + f"/groups/{ORDERS_APP}/reset", form)
    assert status == 403 and "kafkapy.console.writes.enable=true" in body
    status, body, _ = fetch(console + f"/groups/{ORDERS_APP}/reset", form | {"execute": "0"})
    assert status == 200 and 'id="reset-preview-table"' in body
    status, body, _ = fetch(console + f"/api/topics/{ORDERS}/messages?partition=0&limit=1")
    status, body, _ = fetch(console + f"/groups/{ORDERS_APP}")
    assert f'<td class="num">{COMMITTED_P0}</td>' in body  # unchanged


@pytest.mark.parametrize("path,status,message", [
    ("/topics/nope", 404, "unknown topic 'nope' (UNKNOWN_TOPIC_OR_PARTITION)"),
    (f"/topics/{ORDERS}/messages?partition=9", 404, "has no partition 9"),
    (f"/topics/{ORDERS}/messages?offset=abc", 400, "offset must be an integer"),
    (f"/topics/{ORDERS}/messages?limit=0", 400, "limit must be at least 1"),
    (f"/topics/{ORDERS}/messages?limit=100000", 400, "limit must be at most 500"),
    (f"/topics/{ORDERS}/messages?format=xml", 400, "format must be one of"),
    (f"/topics/{ORDERS}/messages?timestamp=yesterday", 400, "timestamp must be epoch milliseconds"),
    (f"/topics/{ORDERS}/messages?from=middle", 400, "from must be earliest, latest or last"),
    ("/topics?page=x", 400, "page must be an integer"),
    ("/groups/nobody", 404, "unknown group 'nobody'"),
    ("/nothing/here", 404, "no page at /nothing/here"),
    ("/static/../../etc/passwd", 404, ""),
])
def test_bad_input_gets_a_clear_message(console, path, status, message):
    got, body, _ = fetch(console + path)
    assert got == status, body
    assert "Traceback" not in body
    assert message.replace("'", "&#39;") in body


def test_api_errors_are_json(console):
    status, body, _ = fetch(console + "/api/topics/nope/messages")
    assert status == 404 and json.loads(body) == {"error": "unknown topic 'nope' (UNKNOWN_TOPIC_OR_PARTITION)"}


@pytest.mark.parametrize("form,status,message", [
    ({"strategy": "sideways"}, 400, "strategy must be one of"),
    ({"strategy": "offset", "value": "ten"}, 400, "must be an integer"),
    ({"strategy": "timestamp", "value": ""}, 400, "a timestamp reset needs a time"),
    ({"strategy": "earliest", "topic": "nope"}, 404, "unknown topic"),
])
def test_bad_reset_forms(console, form, status, message):
    got, body, _ = fetch(console + f"/groups/{ORDERS_APP}/reset", form)
    assert got == status and message in body and "Traceback" not in body


def test_cross_origin_post_and_wrong_method_refused(console):
    status, body, _ = fetch(console + f"/groups/{ORDERS_APP}/reset", {"strategy": "earliest"},
                            headers={"Origin": "http://evil.example"})
    assert status == 403 and "cross-origin" in body
    status, body, _ = fetch(console + "/topics", {"a": "b"})
    assert status == 405 and "POST is not allowed" in body


def test_cluster_mode_each_console_reads_what_its_broker_leads():
    """Two brokers in ZooKeeper mode (in this process, an in-memory ZooKeeper): both consoles show
    both brokers and the controller; a partition led elsewhere answers 409 naming its leader."""
    from kafkapy.testing.cluster import KafkaCluster

    with KafkaCluster(brokers=2, **{"kafkapy.console.listener": "http://127.0.0.1:0"}) as cluster:
        cluster.create_topic("replicated", partitions=2, replication_factor=2)
        for node_id, handle in cluster.brokers.items():
            broker = handle._broker
            url = broker.console.url
            status, body, _ = fetch(url + "/")
            assert status == 200 and re.findall(r"<tr><td>(\d+)</td><td>127", body) == ["1", "2"]
            status, body, _ = fetch(url + "/topics/replicated")
            assert status == 200 and body.count("/topics/replicated/messages?partition=") == 2
            leaders = {p.partition: p.leader for p in broker.metadata.get_topic("replicated").partitions}
            for partition, leader in leaders.items():
                status, body, _ = fetch(url + f"/api/topics/replicated/messages?partition={partition}")
                if leader == node_id:
                    assert status == 200
                else:
                    answer = json.loads(body)
                    assert status == 409 and f"is led by broker {leader}, not this one ({node_id})" in answer["error"]
                    assert answer["link"].endswith(f"/api/topics/replicated/messages?partition={partition}")


@pytest.mark.parametrize("strategy,value,expected", [
    ("latest", "", [30, 5, 5]),
    ("offset", "3", [3, 3, 3]),
    ("offset", "100", [30, 5, 5]),  # clamped to the log end, as kafka-consumer-groups does
    ("shift", "-5", [COMMITTED_P0 - 5, 0, 0]),  # no committed offset: shifted from the log end
    ("timestamp", "2000-01-01T00:00:00", [0, 0, 0]),
    ("timestamp", "2999-01-01T00:00:00", [30, 5, 5]),  # nothing that late: the log end
])
def test_reset_preview_strategies(console, strategy, value, expected):
    form = {"strategy": strategy, "topic": ORDERS, "value": value, "execute": "0"}
    status, body, _ = fetch(console + f"/groups/{ORDERS_APP}/reset", form)
    assert status == 200, body
    table = body[body.index('id="reset-preview-table"'):]
    rows = re.findall(r"<tr><td>orders</td><td class=\"num\">(\d+)</td><td class=\"num\">([-\d]+)</td>"
                      r"<td class=\"num\">(\d+)</td></tr>", table)
    assert [int(new) for _, _, new in rows] == expected
    assert [current for _, current, _ in rows] == [str(COMMITTED_P0), "2", "-"]
