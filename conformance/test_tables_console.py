"""The console's topic page shows the topic's Iceberg table (issue 34): mode, table names, the
current snapshot (id and time), the state with the last error, and per partition led by the broker
the table's committed next offset, the read position and the lag. Against a real `kafkapy serve`
process with kafkapy.console.listener set; the stopped state comes from the warehouse directory
replaced by a regular file (as in test_tables_stopped.py)."""
from __future__ import annotations

import html
import re
import time
import urllib.request

import pytest

pytest.importorskip("pyiceberg")
pytest.importorskip("aiohttp")
pytestmark = pytest.mark.timeout(180)

from confluent_kafka import Producer  # noqa: E402

from conformance.broker_process import free_port  # noqa: E402
from conformance.test_tables_core import create_topic, open_table_catalog, wait_for_table  # noqa: E402


def _page(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as answer:
        assert answer.status == 200
        return answer.read().decode()


def _table_rows(body: str) -> list[list[str]]:
    section = body[body.index('id="table-partitions"'):]
    section = section[:section.index("</table>")]
    rows = [re.findall(r"<td[^>]*>([^<]*)</td>", row) for row in re.findall(r"<tr>(.*?)</tr>", section, re.S)]
    return [row for row in rows if row]  # not the header


def _wait_page(url: str, wanted: str, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    body = ""
    while time.monotonic() < deadline:
        body = _page(url)
        if wanted in body:
            return body
        time.sleep(0.3)
    raise AssertionError(f"{wanted!r} not on {url} within {timeout} s:\n{body[body.find('Iceberg table'):][:2000]}")


def test_topic_page_shows_the_table(broker_factory, topic_name, tmp_path):
    port = free_port()
    warehouse = tmp_path / "warehouse"
    instance = broker_factory({"kafkapy.console.listener": f"http://127.0.0.1:{port}",
                               "kafkapy.iceberg.commit.interval.ms": "300",
                               "kafkapy.iceberg.warehouse": str(warehouse)})
    console = f"http://127.0.0.1:{port}"
    create_topic(instance.bootstrap, topic_name, 2, {"kafkapy.iceberg.mode": "key_value"})
    create_topic(instance.bootstrap, topic_name + "-plain", 1)
    producer = Producer({"bootstrap.servers": instance.bootstrap})
    for i in range(30):
        producer.produce(topic_name, value=b"%d" % i, partition=i % 2)
    assert producer.flush(30) == 0
    catalog = open_table_catalog(instance.data_dir, warehouse=str(warehouse))
    wait_for_table(catalog, topic_name, {0: 15, 1: 15})
    snapshot = catalog.load_table(("kafka", topic_name)).current_snapshot()

    url = f"{console}/topics/{topic_name}"
    body = _wait_page(url, f'<span id="table-snapshot">{snapshot.snapshot_id}</span>')
    summary = html.unescape(body[body.index('id="table-summary"'):body.index('id="table-partitions"')])
    assert "Mode <code>key_value</code>" in summary and f"table <code>kafka.{topic_name}</code>" in summary
    assert f"<code>kafka.{topic_name}~dlq</code>" in summary
    stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(snapshot.timestamp_ms / 1000))
    assert f"at {stamp}" in summary
    assert '<strong id="table-state" >running</strong>' in summary
    assert _table_rows(body) == [["0", "15", "15", "0", ""], ["1", "15", "15", "0", ""]]
    assert "Iceberg table" not in _page(f"{console}/topics/{topic_name}-plain")

    # a failing warehouse: the page shows the stopped state, the error and the lag
    moved = tmp_path / "warehouse.away"
    warehouse.rename(moved)
    warehouse.write_text("not a directory\n")
    try:
        for i in range(30, 40):
            producer.produce(topic_name, value=b"%d" % i, partition=0)
        assert producer.flush(30) == 0
        body = _wait_page(url, ">stopped</strong>")
        error = html.unescape(re.search(r'<span id="table-error">([^<]*)</span>', body).group(1))
        assert error.startswith("commit failed: ") and str(warehouse) in error, error
        assert _table_rows(body)[0][:4] == ["0", "15", "25", "10"]
    finally:
        warehouse.unlink()
        moved.rename(warehouse)
    body = _wait_page(url, ">running</strong>", timeout=90)
    body = _wait_page(url, '<td class="num">25</td>\n<td class="num">25</td><td class="num">0</td>')
    assert _table_rows(body) == [["0", "25", "25", "0", ""], ["1", "15", "15", "0", ""]]
