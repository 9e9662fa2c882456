"""kcat (Debian's build, with an older librdkafka) against a real broker, with its default settings.

Covers what people do with kcat by hand: list metadata (-L), produce lines (-P) with keys,
headers and each compression codec, consume to the end (-C -e), and look up offsets by
timestamp (-Q). kcat is installed by scripts/install-test-deps.sh (apt package `kcat`).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time

import pytest

pytestmark = pytest.mark.timeout(120)

KCAT = shutil.which("kcat") or shutil.which("kafkacat")
if KCAT is None:
    pytest.skip("!!! kcat not installed (apt-get install kcat, or run: bash scripts/test.sh)", allow_module_level=True)

KCAT_TIMEOUT_S = 40


def kcat(bootstrap: str, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    """Run kcat with librdkafka defaults (no -X: api.version.request and broker.version.fallback as shipped)."""
    argv = [KCAT, "-b", bootstrap, *args]
    try:
        result = subprocess.run(argv, input=stdin, capture_output=True, timeout=KCAT_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(
            f"kcat timed out after {KCAT_TIMEOUT_S} s: {' '.join(argv)}\nstderr:\n{(exc.stderr or b'').decode(errors='replace')}"
        ) from None
    assert result.returncode == 0, (
        f"kcat failed ({result.returncode}): {' '.join(argv)}\nstderr:\n{result.stderr.decode(errors='replace')}"
    )
    return result


def kcat_version() -> str:
    out = subprocess.run([KCAT, "-V"], capture_output=True, timeout=10).stdout.decode(errors="replace")
    return " ".join(out.split())


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=10).values():
        fut.result(timeout=30)


def metadata_json(bootstrap: str, topic: str | None = None) -> dict:
    args = ["-L", "-J"] + (["-t", topic] if topic else [])
    return json.loads(kcat(bootstrap, *args).stdout)


def wait_for_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 20) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        meta = metadata_json(bootstrap, topic)
        found = [t for t in meta.get("topics", []) if t.get("topic") == topic]
        if found and "error" not in found[0] and len(found[0].get("partitions", [])) == partitions:
            return meta
        assert time.monotonic() < deadline, f"topic {topic} not in kcat metadata: {meta}"
        time.sleep(0.3)


def consume_json(bootstrap: str, topic: str, partition: int, *extra: str) -> list[dict]:
    out = kcat(bootstrap, "-C", "-t", topic, "-p", str(partition), "-o", "beginning", "-e", "-J", *extra).stdout
    return [json.loads(line) for line in out.decode().splitlines() if line.strip()]


def test_kcat_metadata_list(broker, topic_name):
    print(f"kcat: {kcat_version()}")
    create_topic(broker.bootstrap, topic_name, partitions=3)
    meta = wait_for_topic(broker.bootstrap, topic_name, 3)
    brokers = meta["brokers"]
    assert len(brokers) == 1
    host, port = broker.bootstrap.rsplit(":", 1)
    assert brokers[0]["name"] == f"{host}:{port}", "the advertised listener must be what clients see"
    topic = next(t for t in meta["topics"] if t["topic"] == topic_name)
    assert sorted(p["partition"] for p in topic["partitions"]) == [0, 1, 2]
    for part in topic["partitions"]:
        assert part["leader"] == brokers[0]["id"]
        assert [r["id"] for r in part["replicas"]] == [brokers[0]["id"]]
        assert [r["id"] for r in part["isrs"]] == [brokers[0]["id"]]

    # The plain-text listing kcat users read.
    text = kcat(broker.bootstrap, "-L").stdout.decode()
    assert "1 brokers:" in text and f'topic "{topic_name}" with 3 partitions:' in text


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_kcat_produce_consume_roundtrip(broker, topic_name, codec):
    create_topic(broker.bootstrap, topic_name, partitions=1)
    wait_for_topic(broker.bootstrap, topic_name, 1)
    lines = [f"key-{i}:value-{i}-{'x' * (i % 50)}" for i in range(500)]
    produce_args = ["-P", "-t", topic_name, "-p", "0", "-K", ":", "-H", "origin=kcat", "-H", f"codec={codec}"]
    if codec != "none":
        produce_args += ["-z", codec]
    kcat(broker.bootstrap, *produce_args, stdin=("\n".join(lines) + "\n").encode())

    records = consume_json(broker.bootstrap, topic_name, 0)
    assert [r["offset"] for r in records] == list(range(len(lines)))
    assert [f"{r['key']}:{r['payload']}" for r in records] == lines
    for r in records:
        assert r["headers"] == ["origin", "kcat", "codec", codec]
        assert r["tstype"] == "create" and r["ts"] > 0


def test_kcat_consume_empty_topic_exits(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=1)
    wait_for_topic(broker.bootstrap, topic_name, 1)
    assert consume_json(broker.bootstrap, topic_name, 0) == []


def test_kcat_produce_autocreates_topic(broker, topic_name):
    """With Kafka's default auto.create.topics.enable=true, producing to a new topic creates it."""
    kcat(broker.bootstrap, "-P", "-t", topic_name, "-p", "0", stdin=b"hello\nworld\n")
    records = consume_json(broker.bootstrap, topic_name, 0)
    assert [r["payload"] for r in records] == ["hello", "world"]


def test_kcat_query_offsets_by_timestamp(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=1)
    wait_for_topic(broker.bootstrap, topic_name, 1)
    kcat(broker.bootstrap, "-P", "-t", topic_name, "-p", "0", stdin=b"a\nb\nc\n")
    records = consume_json(broker.bootstrap, topic_name, 0)
    assert len(records) == 3
    first_ts = records[0]["ts"]
    # -Q prints "<topic> [<partition>] offset <n>" for each topic:partition:timestamp.
    out = kcat(broker.bootstrap, "-Q", "-t", f"{topic_name}:0:{first_ts}").stdout.decode()
    assert f"{topic_name} [0] offset 0" in out, out
    out = kcat(broker.bootstrap, "-Q", "-t", f"{topic_name}:0:{first_ts + 3_600_000}").stdout.decode()
    assert f"{topic_name} [0] offset -1" in out, out
