"""The schema registry in a 3-broker ZooKeeper-mode cluster: every broker serves the API, one elected
leader (a Kafka group, protocol type "sr") writes and the others forward to it; killing the leader's
broker leaves writes working through the next leader, with no id handed out twice; writes are
forwarded over https with client certificates too."""
from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request

import pytest

pytest.importorskip("avro")

from conformance.broker_process import PYTHON_ENV, free_port  # noqa: E402
from kafkapy.devcluster.brokers import LocalCluster  # noqa: E402
from kafkapy.devcluster.launcher import stop_children_on_sigterm  # noqa: E402
from kafkapy.devcluster.zookeeper import JavaZooKeeper  # noqa: E402

pytestmark = pytest.mark.timeout(180)

CONTENT = {"Content-Type": "application/vnd.schemaregistry.v1+json"}


def call(url: str, method: str = "GET", body: dict | None = None, timeout: float = 40) -> tuple[int, object]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers=CONTENT)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")
    except (urllib.error.URLError, OSError) as exc:
        return 0, str(exc)


def schema(i: int) -> dict:
    return {"schema": json.dumps({"type": "record", "name": f"R{i}", "fields": [{"name": "f", "type": "int"}]})}


def register_until_ok(url: str, subject: str, body: dict, deadline_s: float) -> dict:
    deadline = time.monotonic() + deadline_s
    while True:
        status, answer = call(f"{url}/subjects/{subject}/versions", "POST", body)
        if status == 200:
            return answer
        if time.monotonic() > deadline:
            raise AssertionError(f"registration through {url} still fails: {status} {answer}")
        time.sleep(0.5)


def test_writes_forwarded_to_the_leader_and_survive_its_death(tmp_path):
    available, reason = JavaZooKeeper.available()
    if not available:
        pytest.skip(f"!!! ZooKeeper is not available, cluster tests cannot run: {reason}")
    stop_children_on_sigterm()
    # faster failure detection than the defaults, so that the test stays short: the dead broker's
    # group member and ISR entry go after a few seconds
    cluster = LocalCluster(tmp_path, brokers=3, python=os.environ.get(PYTHON_ENV) or None, overrides={
        "group.initial.rebalance.delay.ms": "0", "replica.lag.time.max.ms": "4000",
        "zookeeper.session.timeout.ms": "6000"})
    urls = {}
    for broker_id, node in cluster.brokers.items():
        urls[broker_id] = f"http://127.0.0.1:{free_port()}"
        node.overrides["kafkapy.schema.registry.listener"] = urls[broker_id]
    cluster.start(60)
    try:
        # every broker's registry takes writes (forwarded to the leader) and serves reads
        ids = {}
        for i, (broker_id, url) in enumerate(urls.items()):
            ids[f"s{i}"] = register_until_ok(url, f"s{i}", schema(i), 60)["id"]
        assert sorted(ids.values()) == [1, 2, 3]
        leaders = {call(f"{url}/kafkapy/leader")[1]["leader"] for url in urls.values()}
        assert len(leaders) == 1
        leader_url = leaders.pop()
        leader_id = next(b for b, url in urls.items() if url == leader_url)
        for url in urls.values():
            deadline = time.monotonic() + 20
            while call(f"{url}/subjects")[1] != ["s0", "s1", "s2"] and time.monotonic() < deadline:
                time.sleep(0.2)
            assert call(f"{url}/subjects")[1] == ["s0", "s1", "s2"]
        # the leader's broker dies: a survivor's registry takes over
        cluster.broker(leader_id).kill9()
        survivors = [url for b, url in urls.items() if b != leader_id]
        answer = register_until_ok(survivors[0], "after", schema(10), 90)
        assert answer["id"] > max(ids.values())  # no id handed out twice
        second = register_until_ok(survivors[1], "after2", schema(11), 30)
        assert second["id"] > answer["id"]
        new_leader = call(f"{survivors[0]}/kafkapy/leader")[1]["leader"]
        assert new_leader in survivors
        for url in survivors:
            status, subjects = call(f"{url}/subjects")
            assert status == 200 and {"s0", "s1", "s2", "after"} <= set(subjects)
    finally:
        cluster.stop()


def test_https_forwarding_between_the_registries(tmp_path):
    """Every broker's registry on https with client certificates required: a write sent to a
    follower is forwarded to the leader over https, with the brokers' key store as its client
    certificate, and every registry then serves it."""
    import ssl

    from conformance.tls_certs import make_certs

    available, reason = JavaZooKeeper.available()
    if not available:
        pytest.skip(f"!!! ZooKeeper is not available, cluster tests cannot run: {reason}")
    stop_children_on_sigterm()
    certs = make_certs(tmp_path / "certs")
    alice = certs.client("alice")
    context = ssl.create_default_context(cafile=str(certs.ca_pem))
    context.load_cert_chain(str(alice.cert_pem), str(alice.key_pem))
    cluster = LocalCluster(tmp_path, brokers=3, python=os.environ.get(PYTHON_ENV) or None, overrides={
        "group.initial.rebalance.delay.ms": "0", "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.broker_keystore), "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs.ca_pem), "listener.name.schema_registry.ssl.client.auth": "required"})
    urls = {}
    for broker_id, node in cluster.brokers.items():
        urls[broker_id] = f"https://127.0.0.1:{free_port()}"
        node.overrides["kafkapy.schema.registry.listener"] = urls[broker_id]

    def tls_call(url: str, method: str = "GET", body: dict | None = None) -> tuple[int, object]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(url, data=data, method=method, headers=CONTENT)
        try:
            with urllib.request.urlopen(request, timeout=30, context=context) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"null")
        except (urllib.error.URLError, OSError) as exc:
            return 0, str(exc)

    cluster.start(60)
    try:
        deadline = time.monotonic() + 60
        leader = None
        while time.monotonic() < deadline:
            status, answer = tls_call(f"{urls[1]}/kafkapy/leader")
            if status == 200 and answer.get("leader"):
                leader = answer["leader"]
                break
            time.sleep(0.5)
        assert leader in urls.values(), leader
        followers = [url for url in urls.values() if url != leader]
        ids = []
        for i, url in enumerate(followers):
            deadline = time.monotonic() + 40
            while True:
                status, answer = tls_call(f"{url}/subjects/f{i}/versions", "POST", schema(i))
                if status == 200 or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
            assert status == 200, answer
            ids.append(answer["id"])
        assert sorted(ids) == [1, 2]
        for url in urls.values():
            deadline = time.monotonic() + 20
            while tls_call(f"{url}/subjects")[1] != ["f0", "f1"] and time.monotonic() < deadline:
                time.sleep(0.2)
            assert tls_call(f"{url}/subjects")[1] == ["f0", "f1"]
    finally:
        cluster.stop()
