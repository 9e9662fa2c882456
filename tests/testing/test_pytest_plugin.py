"""kafkapy's pytest plugin, used the way a user's project uses it: a small test project (pytester) run in
a pytest subprocess, so the plugin is loaded by the installed `pytest11` entry point as it would be
after `pip install kafkapy`. One inner run covers every fixture, the marker, the ini options, both
client libraries' helpers, restart and kill, and pytest-xdist (two workers, a broker each); the outer
test then checks that nothing was left behind: no broker process, no listening port, no temp dir."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]
pytest.importorskip("confluent_kafka")
pytest.importorskip("kafka")
pytest.importorskip("xdist")

pytestmark = pytest.mark.timeout(240)

# The inner project's own helper (a user's project needs none of it): each test appends what it saw to
# a JSON-lines file, since output of xdist workers does not reach the outer run.
CONFTEST = '''
import json, os
import pytest

def kafkapy_children():
    """Child processes of this pytest process that run kafkapy (the process-isolated brokers)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = f.read().rsplit(")", 1)[1].split()[1]
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if int(ppid) == os.getpid() and "kafkapy" in cmdline:
            found.append(int(entry))
    return found

@pytest.fixture
def report(request):
    def write(broker, **extra):
        record = {"test": request.node.name, "worker": os.environ.get("PYTEST_XDIST_WORKER", "-"),
                  "isolation": broker.isolation, "storage": broker.storage, "port": broker.port,
                  "data_dir": str(broker.data_dir),
                  "children": kafkapy_children(), **extra}
        with open(os.environ["KAFKAPY_PLUGIN_REPORT"], "a") as f:
            f.write(json.dumps(record) + "\\n")
    return write

def poll_one(consumer, timeout=30.0):
    """The first record a confluent-kafka consumer gets."""
    import time
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            return message
    raise AssertionError("no record")
'''

INI = """
[pytest]
kafka_broker_isolation = process
kafka_broker_properties =
    num.partitions=2
    log.retention.hours=7
"""

# session broker, confluent-kafka helpers, clients left open on purpose, the marker on kafka_broker
TEST_SESSION = '''
import pytest
from conftest import poll_one

LEFT_OPEN = {}

@pytest.fixture(scope="session")
def shared_producer(kafka_broker):
    return kafka_broker.producer()                              # lives as long as the session broker

def test_confluent_helpers_on_the_session_broker(kafka_broker, shared_producer, report):
    assert kafka_broker.isolation == "process"                  # kafka_broker_isolation
    assert kafka_broker.properties["num.partitions"] == "2"     # kafka_broker_properties
    assert kafka_broker.properties["log.retention.hours"] == "7"
    assert kafka_broker.properties["group.initial.rebalance.delay.ms"] == "0"     # the plugin's test default
    producer = kafka_broker.producer()
    producer.produce("orders", b"one")                          # auto-created: 2 partitions
    assert producer.flush(30) == 0
    consumer = kafka_broker.consumer(topics=["orders"])         # own group, from the earliest offset
    assert poll_one(consumer).value() == b"one"
    metadata = kafka_broker.admin().list_topics("orders", timeout=30)
    assert len(metadata.topics["orders"].partitions) == 2
    report(kafka_broker, session=True)
    # producer and consumer are not closed: the plugin closes them when the test ends
    LEFT_OPEN["consumer"] = consumer

@pytest.mark.kafka_broker(**{"num.partitions": "9"})
def test_marker_does_not_apply_to_the_session_broker(kafka_broker, shared_producer, report):
    assert kafka_broker.properties["num.partitions"] == "2"
    with pytest.raises(RuntimeError, match="closed"):
        LEFT_OPEN["consumer"].poll(0)                            # closed when the test above ended
    shared_producer.produce("orders", b"two")                    # a session fixture's client is not
    assert shared_producer.flush(30) == 0
    report(kafka_broker, session=True)
'''

# kafka-python and aiokafka helpers; the session broker killed by one test is back for the next
TEST_OTHER_CLIENTS = '''
import asyncio

def test_kafka_python_helpers(kafka_broker, report):
    producer = kafka_broker.producer(client="kafka-python", **{"acks": "all"})   # dotted names work too
    producer.send("legacy", b"v").get(timeout=30)
    consumer = kafka_broker.consumer(topics="legacy", client="kafka-python")
    records = []
    for _ in range(60):
        for batch in consumer.poll(timeout_ms=500).values():
            records += [record.value for record in batch]
        if records:
            break
    assert records == [b"v"]
    assert "legacy" in kafka_broker.admin(client="kafka-python").list_topics()
    report(kafka_broker, session=True)

def test_aiokafka_helpers(kafka_broker):
    async def main():
        producer = kafka_broker.producer(client="aiokafka")
        await producer.start()
        await producer.send_and_wait("aio", b"a")
        await producer.stop()
        consumer = kafka_broker.consumer(topics="aio", client="aiokafka")
        await consumer.start()
        try:
            return (await asyncio.wait_for(consumer.getone(), 30)).value
        finally:
            await consumer.stop()
    assert asyncio.run(main()) == b"a"

def test_kill_the_session_broker(kafka_broker, report):
    report(kafka_broker, session=True)
    kafka_broker.kill()
    assert not kafka_broker.running

def test_the_session_broker_is_back(kafka_broker, report):
    assert kafka_broker.running
    report(kafka_broker, session=True)
'''

# the factory, markers (module, then function: the closest wins), restart and kill through it
TEST_FACTORY = '''
import pytest
from conftest import poll_one

pytestmark = pytest.mark.kafka_broker(**{"num.partitions": "3", "log.retention.hours": "5"})

@pytest.mark.kafka_broker(isolation="thread", **{"num.partitions": "4"})
def test_markers_set_the_factory_defaults(kafka_broker_factory, kafka_broker, report):
    broker = kafka_broker_factory()
    assert broker.isolation == "thread"
    assert broker.properties["num.partitions"] == "4"
    assert broker.properties["log.retention.hours"] == "5"
    assert broker.properties["group.initial.rebalance.delay.ms"] == "0"     # the plugin's test default
    other = kafka_broker_factory(isolation="process", storage="memory", **{"num.partitions": "5"})
    assert other.isolation == "process" and other.storage == "memory"
    assert other.port not in (broker.port, kafka_broker.port)
    producer = other.producer()
    producer.produce("five", b"x")
    assert producer.flush(30) == 0
    assert len(other.admin().list_topics("five", timeout=30).topics["five"].partitions) == 5
    report(broker)
    report(other)
    report(kafka_broker, session=True)

def test_restart_and_kill_through_the_factory(kafka_broker_factory, report):
    broker = kafka_broker_factory()                              # process isolation, from the ini
    assert broker.properties["num.partitions"] == "3"
    producer = broker.producer(**{"acks": "all"})
    producer.produce("kept", b"before")
    assert producer.flush(30) == 0
    port = broker.port
    broker.restart()
    assert broker.port == port
    consumer = broker.consumer(topics="kept")
    assert poll_one(consumer).value() == b"before"
    report(broker)
    broker.kill()                                                # left killed, consumer left open
    assert not broker.running
'''


def read_reports(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def port_is_free(port: int) -> bool:
    with socket.socket() as probe:
        # SO_REUSEADDR: a port whose last connections are in TIME_WAIT is free; one still listened on is not
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def is_kafkapy_process(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"kafkapy" in f.read()
    except OSError:
        return False


def test_a_user_project_under_xdist_gets_a_broker_per_worker_and_leaves_nothing_behind(pytester, monkeypatch,
                                                                                      tmp_path):
    report_path = tmp_path / "reports.jsonl"
    temp_dir = tmp_path / "tmp"
    temp_dir.mkdir()
    memory_dir = tmp_path / "memory"   # any writable directory will do for storage="memory"
    memory_dir.mkdir()
    monkeypatch.setenv("KAFKAPY_MEMORY_DIR", str(memory_dir))
    monkeypatch.setenv("KAFKAPY_PLUGIN_REPORT", str(report_path))
    monkeypatch.setenv("TMPDIR", str(temp_dir))   # where the brokers' temporary data dirs go
    pytester.makeini(INI)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_session=TEST_SESSION, test_other_clients=TEST_OTHER_CLIENTS, test_factory=TEST_FACTORY)

    # loadfile: a file's tests run in order on one worker (the kill test, then the one after it)
    result = pytester.runpytest_subprocess("-n", "2", "--dist", "loadfile", "-p", "no:cacheprovider",
                                           "-W", "ignore::DeprecationWarning",   # kafka-python 3.0 on 3.11
                                           timeout=180)
    result.assert_outcomes(passed=8)
    result.stdout.fnmatch_lines(["*@pytest.mark.kafka_broker applies to brokers from kafka_broker_factory*"])

    reports = read_reports(report_path)
    session = [r for r in reports if r.get("session")]
    ports_by_worker: dict[str, set[int]] = {}
    for r in session:
        ports_by_worker.setdefault(r["worker"], set()).add(r["port"])
    # both workers had a session broker, one each (kill and restart kept its port), not the same one
    assert sorted(ports_by_worker) == ["gw0", "gw1"], reports
    assert all(len(ports) == 1 for ports in ports_by_worker.values()), ports_by_worker
    assert ports_by_worker["gw0"] != ports_by_worker["gw1"]
    assert {r["isolation"] for r in session} == {"process"}
    # the process-isolated brokers were children of the workers while they ran
    children = {pid for r in reports for pid in r["children"]}
    assert len(children) >= 3, reports

    # nothing left behind: no broker process, no listening port, no data dir or log, nothing in TMPDIR
    # or in the memory storage's directory
    assert [pid for pid in children if is_kafkapy_process(pid)] == []
    assert [r["port"] for r in reports if not port_is_free(r["port"])] == []
    assert [r["data_dir"] for r in reports if os.path.exists(r["data_dir"])] == []
    assert {Path(r["data_dir"]).parent for r in reports} == {temp_dir, memory_dir}
    assert sorted(os.listdir(temp_dir)) == [] and sorted(os.listdir(memory_dir)) == []


def test_bad_ini_values_are_usage_errors(pytester):
    pytester.makeini("[pytest]\nkafka_broker_isolation = container\n")
    pytester.makepyfile("def test_uses_it(kafka_broker):\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=60)
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*kafka_broker_isolation must be 'thread' or 'process'*"])


def test_client_library_names_and_default_order():
    from kafkapy.testing.clients import client_library

    assert client_library() == "confluent-kafka"       # installed here, and first in the order
    assert client_library("kafka") == "kafka-python"
    assert client_library("confluent_kafka") == "confluent-kafka"
    with pytest.raises(ValueError, match="kafka-python"):
        client_library("pykafka")


def test_loading_the_plugin_imports_no_broker_code():
    """pytest loads the plugin at every start-up, in every project where kafkapy is installed: that must
    cost nothing (the broker, the protocol and asyncio are imported when a fixture is first used)."""
    code = ("import sys, kafkapy.testing.pytest_plugin; "
            "print(sorted(m for m in sys.modules if m.startswith('kafkapy') or m == 'asyncio'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/",
                         timeout=60).stdout
    assert out.strip() == str(["kafkapy", "kafkapy.testing", "kafkapy.testing.pytest_plugin"])


def test_helper_clients_are_closed_when_the_broker_stops_even_after_a_kill():
    """The helpers on KafkaBroker itself, without pytest's fixtures: a consumer left open on a killed
    broker is closed at stop() (the broker comes back for it), with no closing thread left hanging."""
    import threading

    from kafkapy.testing import KafkaBroker

    with KafkaBroker(**{"group.initial.rebalance.delay.ms": "0"}) as broker:
        producer = broker.producer()
        producer.produce("left-open", b"x")
        assert producer.flush(30) == 0
        consumer = broker.consumer(topics="left-open")
        assert [m.value() for m in consumer.consume(1, timeout=30)] == [b"x"]
        legacy = broker.consumer(topics="left-open", client="kafka-python")
        assert broker.clients_made == 3
        broker.kill()
    assert not broker.running
    # first: a poll() would wait for a close still running on another thread
    assert [t.name for t in threading.enumerate() if t.name.startswith("kafkapy-close")] == []
    with pytest.raises(RuntimeError, match="closed"):
        consumer.poll(0)
    assert legacy._closed


def test_aiokafka_clients_left_open_are_stopped_by_async_with():
    """aiokafka's clients live on the test's event loop: `async with` stops the broker on a worker
    thread while that loop runs, so their stop() coroutines are run on it."""
    import asyncio

    from kafkapy.testing import KafkaBroker

    async def main():
        async with KafkaBroker(**{"group.initial.rebalance.delay.ms": "0"}) as broker:
            producer = broker.producer(client="aiokafka")
            await producer.start()
            await producer.send_and_wait("aio", b"x")
            consumer = broker.consumer(topics="aio", client="aiokafka")
            await consumer.start()
            assert (await asyncio.wait_for(consumer.getone(), 30)).value == b"x"
        return producer, consumer

    producer, consumer = asyncio.run(asyncio.wait_for(main(), 60))
    assert producer._closed and consumer._closed
