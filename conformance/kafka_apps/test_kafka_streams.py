"""A Kafka Streams app (Streams 3.7 and 4.4, exactly_once_v2) counting records against kafkapy.

java/StreamsCount.java groups the input by value (a repartition topic), counts (a store with its
changelog topic) and writes the running counts to the output topic, all in Streams' transactions.
The test produces the input, reads the output with isolation.level=read_committed until every
value's latest count is there, and checks the counts against what it produced.
"""
from __future__ import annotations

import collections
import os
import time
import uuid
from pathlib import Path

import pytest

from conformance.kafka_apps.kafka_jars import KafkaDist, compile_java, stop_process

pytestmark = pytest.mark.timeout(180)

RECORDS = 3000
WORDS = 7
RUNNING_TIMEOUT_S = 60.0
OUTPUT_TIMEOUT_S = 60.0


@pytest.mark.parametrize("line", ["3.7", "4.4"])
def test_streams_exactly_once_count(broker, line: str, tmp_path: Path) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka", reason="!!! confluent-kafka not installed")
    from confluent_kafka.admin import AdminClient, NewTopic

    dist = KafkaDist.get(line)
    cp = dist.streams_classpath()
    classes = compile_java("StreamsCount.java", cp)
    suffix = uuid.uuid4().hex[:8]
    app_id, source, sink = f"streams-count-{suffix}", f"streams-in-{suffix}", f"streams-out-{suffix}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(source, 2, 1), NewTopic(sink, 2, 1)]).values():
        future.result(30)

    log = tmp_path / "streams.log"
    proc = dist.java_process(f"{classes}{os.pathsep}{cp}", "StreamsCount", broker.bootstrap, app_id, source, sink,
                             str(tmp_path / "state"), log_path=log)
    try:
        _wait_for(lambda: "STATE RUNNING" in log.read_text(errors="replace"), RUNNING_TIMEOUT_S, proc, log,
                  "the Streams app did not reach RUNNING")
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
        expected = collections.Counter()
        for i in range(RECORDS):
            word = f"word-{i % WORDS}"
            expected[word] += 1
            producer.produce(source, key=f"key-{i}", value=word)
        assert producer.flush(30) == 0

        consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"check-{suffix}",
                                             "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                                             "enable.auto.commit": False})
        latest: dict[str, int] = {}
        try:
            consumer.subscribe([sink])
            deadline = time.monotonic() + OUTPUT_TIMEOUT_S
            while latest != dict(expected) and time.monotonic() < deadline:
                if proc.poll() is not None:
                    pytest.fail(f"the Streams app exited {proc.returncode}:\n{_tail(log)}", pytrace=False)
                message = consumer.poll(0.5)
                if message is None:
                    continue
                assert message.error() is None, message.error()
                latest[message.key().decode()] = int.from_bytes(message.value(), "big", signed=True)
        finally:
            consumer.close()
        assert latest == dict(expected), f"counts read_committed from {sink} differ\n{_tail(log)}"
        text = log.read_text(errors="replace")
        assert "UNCAUGHT" not in text and "ERROR" not in text, _tail(log)
    finally:
        stop_process(proc)
    # The app saw SIGTERM, closed its threads and committed its last transaction cleanly.
    assert proc.returncode in (0, 143), f"Streams app exited {proc.returncode}\n{_tail(log)}"
    assert "STATE NOT_RUNNING" in log.read_text(errors="replace"), _tail(log)


def _wait_for(condition, timeout: float, proc, log: Path, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            pytest.fail(f"{what}: it exited {proc.returncode}\n{_tail(log)}", pytrace=False)
        if time.monotonic() > deadline:
            pytest.fail(f"{what} within {timeout:.0f} s\n{_tail(log)}", pytrace=False)
        time.sleep(0.1)


def _tail(log: Path, chars: int = 6000) -> str:
    return f"----- {log} -----\n" + log.read_text(errors="replace")[-chars:]
