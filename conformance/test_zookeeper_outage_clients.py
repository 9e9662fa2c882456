"""New clients during a ZooKeeper outage, and brokers asked to stop during one (issue 30).

Kafka answers ApiVersions, the first request of every connection, from what the broker holds in
memory; kafkapy read the finalized features from ZooKeeper for it, so with ZooKeeper away every new
connection got a traceback and was closed (an idempotent producer that needed a new connection
stalled). And a controller asked to stop waited forever for its own controlled shutdown, which
needs ZooKeeper; Kafka gives up after `controlled.shutdown.max.retries` attempts, each bounded by
the request timeout, and shuts down uncleanly.
"""
from __future__ import annotations

import signal
import time

import pytest

from conformance.cluster_harness import start_cluster, wait_for_isr
from kafkapy.admin.client import AdminClient
from kafkapy.protocol.messages import ApiVersionsRequest, MetadataRequest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient as ConfluentAdmin, NewTopic

pytestmark = pytest.mark.timeout(240)

REQUEST_TIMEOUT_MS = 5000
BACKOFF_MS = 500
RETRIES = 3


def test_new_connections_and_a_clean_stop_while_zookeeper_is_down(tmp_path):
    cluster = start_cluster(tmp_path, 3, {"request.timeout.ms": str(REQUEST_TIMEOUT_MS),
                                          "controlled.shutdown.retry.backoff.ms": str(BACKOFF_MS),
                                          "controlled.shutdown.max.retries": str(RETRIES)})
    with cluster:
        admin = ConfluentAdmin({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("outage", 3, 3)])["outage"].result(30)
        wait_for_isr(cluster, "outage", 3)
        assert cluster.zookeeper is not None
        cluster.zookeeper.stop()
        time.sleep(2)  # every broker has seen its ZooKeeper connection drop

        # a fresh connection to every broker, at ApiVersions v3 (Java 3.3-3.8) and v4, then Metadata
        for address in cluster.bootstrap.split(","):
            for cap in (3, 4):
                with AdminClient(address) as client:
                    versions = client.send(ApiVersionsRequest(client_software_name="outage",
                                                              client_software_version="1"), cap=cap)
                    assert versions.error_code == 0 and versions.api_keys
                    metadata = client.send(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(
                        name="outage")]))
                    assert [t.error_code for t in metadata.topics] == [0]

        # a new idempotent producer (new connections everywhere) writes with acks=all
        producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True,
                                             "acks": "all", "message.timeout.ms": 30000})
        delivered = []
        for i in range(300):
            producer.produce("outage", str(i).encode(), key=str(i).encode(),
                             on_delivery=lambda err, msg: delivered.append(err))
        assert producer.flush(40) == 0
        assert delivered == [None] * 300

        # SIGTERM to every broker: each gives up its controlled shutdown after its attempts and stops
        started = time.monotonic()
        for broker_id in (1, 2, 3):
            cluster.broker(broker_id).send_signal(signal.SIGTERM)
        bound = RETRIES * (REQUEST_TIMEOUT_MS + BACKOFF_MS) / 1000 + 30
        codes = {broker_id: cluster.broker(broker_id).wait_stopped(bound) for broker_id in (1, 2, 3)}
        took = time.monotonic() - started
        assert codes == {1: 0, 2: 0, 3: 0}, f"exit codes {codes} after {took:.0f} s (a non-zero code: killed)"
        for broker_id in (1, 2, 3):
            log = cluster.broker(broker_id).log_tail(400)
            assert "Traceback" not in log, log
