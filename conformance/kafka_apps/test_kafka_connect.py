"""Kafka Connect 3.7 in distributed mode against kafkapy, with the FileStream connectors.

One worker (org.apache.kafka.connect.cli.ConnectDistributed) keeps its configs, offsets and statuses
in three compacted topics on kafkapy and joins a Connect group there (the "connect" protocol of the
group coordinator); its REST API listens on 127.0.0.1. A FileStreamSource connector turns the lines
of a file into records of a topic, a FileStreamSink connector writes that topic's records to a file.
"""
from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from conformance.kafka_apps.kafka_jars import KafkaDist, stop_process

pytestmark = pytest.mark.timeout(180)

LINES = 200
START_TIMEOUT_S = 60.0
FLOW_TIMEOUT_S = 60.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _rest(url: str, method: str = "GET", body: dict | None = None, timeout: float = 10.0):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        text = response.read().decode()
        return response.status, (json.loads(text) if text else None)


def test_connect_distributed_file_source_to_sink(broker, tmp_path: Path) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka", reason="!!! confluent-kafka not installed")
    dist = KafkaDist.get("3.7")
    cp = dist.connect_classpath()
    suffix = uuid.uuid4().hex[:8]
    port = _free_port()
    topic = f"connect-lines-{suffix}"
    source_file, sink_file = tmp_path / "source.txt", tmp_path / "sink.txt"
    source_file.write_text("")
    worker = tmp_path / "worker.properties"
    worker.write_text("\n".join([
        f"bootstrap.servers={broker.bootstrap}",
        f"group.id=connect-{suffix}",
        "key.converter=org.apache.kafka.connect.storage.StringConverter",
        "value.converter=org.apache.kafka.connect.storage.StringConverter",
        f"config.storage.topic=connect-configs-{suffix}",
        f"offset.storage.topic=connect-offsets-{suffix}",
        f"status.storage.topic=connect-status-{suffix}",
        "config.storage.replication.factor=1",
        "offset.storage.replication.factor=1",
        "status.storage.replication.factor=1",
        "offset.storage.partitions=3",
        "status.storage.partitions=1",
        "offset.flush.interval.ms=1000",
        f"listeners=http://127.0.0.1:{port}",
        "rest.advertised.host.name=127.0.0.1",
        f"rest.advertised.port={port}",
        "",
    ]))
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "connect.log"
    proc = dist.java_process(cp, "org.apache.kafka.connect.cli.ConnectDistributed", str(worker), log_path=log)
    try:
        _wait(lambda: _answers(f"{base}/connectors"), START_TIMEOUT_S, proc, log, "the Connect worker's REST API")
        status, version = _rest(base)
        assert status == 200 and version["version"] == dist.version, version
        status, _ = _rest(f"{base}/connectors", "POST", {"name": "lines-source", "config": {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector", "tasks.max": "1",
            "file": str(source_file), "topic": topic}})
        assert status == 201
        status, _ = _rest(f"{base}/connectors", "POST", {"name": "lines-sink", "config": {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector", "tasks.max": "1",
            "file": str(sink_file), "topics": topic}})
        assert status == 201
        for name in ("lines-source", "lines-sink"):
            _wait(lambda: _running(f"{base}/connectors/{name}/status"), START_TIMEOUT_S, proc, log,
                  f"connector {name} and its task RUNNING")
        _, names = _rest(f"{base}/connectors")
        assert sorted(names) == ["lines-sink", "lines-source"]

        lines = [f"line {i} {uuid.uuid4().hex}" for i in range(LINES)]
        with source_file.open("a") as f:
            f.write("".join(line + "\n" for line in lines))
        _wait(lambda: sink_file.exists() and sink_file.read_text().splitlines() == lines, FLOW_TIMEOUT_S, proc, log,
              f"the {LINES} lines in {sink_file}")

        # The topic in between holds the lines, in order, as Connect's StringConverter wrote them.
        consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"check-{suffix}",
                                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        values: list[str] = []
        try:
            consumer.subscribe([topic])
            deadline = time.monotonic() + 30
            while len(values) < LINES and time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is not None and message.error() is None:
                    values.append(message.value().decode())
        finally:
            consumer.close()
        assert values == lines

        status, _ = _rest(f"{base}/connectors/lines-source", "DELETE")
        assert status == 204
    finally:
        stop_process(proc, timeout=20)
    assert proc.returncode in (0, 143), f"Connect exited {proc.returncode}\n{_tail(log)}"


def _answers(url: str) -> bool:
    try:
        return _rest(url, timeout=2)[0] == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return False


def _running(url: str) -> bool:
    try:
        status, body = _rest(url, timeout=2)
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return False
    tasks = body.get("tasks", [])
    return (status == 200 and body["connector"]["state"] == "RUNNING" and tasks
            and all(t["state"] == "RUNNING" for t in tasks))


def _wait(condition, timeout: float, proc, log: Path, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            pytest.fail(f"waiting for {what}: Connect exited {proc.returncode}\n{_tail(log)}", pytrace=False)
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {timeout:.0f} s\n{_tail(log)}", pytrace=False)
        time.sleep(0.2)


def _tail(log: Path, chars: int = 8000) -> str:
    return f"----- {log} -----\n" + log.read_text(errors="replace")[-chars:]
