"""Connection limits against a real broker process (connection_quotas.py), as Kafka's
ConnectionQuotas applies them: max.connections.per.ip (+ overrides) closes the excess connection,
max.connections and max.connection.creation.rate make new connections wait (Kafka's acceptor
blocks; kafkapy does not read them until admitted), connections.max.idle.ms closes idle ones."""
from __future__ import annotations

import socket
import time

import pytest

from conformance.broker_process import start_broker
from conformance.kafka_wire import ConnectionClosed, RawConnection, api_versions_request

confluent_kafka = pytest.importorskip("confluent_kafka")
admin_api = pytest.importorskip("confluent_kafka.admin")


def _served(conn: RawConnection, timeout: float = 5.0) -> bool:
    """True if the connection answers an ApiVersions request within `timeout`."""
    conn.sock.settimeout(timeout)
    try:
        conn.roundtrip(api_versions_request(0, correlation_id=7))
        return True
    except (ConnectionClosed, ConnectionResetError, BrokenPipeError, socket.timeout):
        return False


@pytest.fixture
def broker_with():
    started = []

    def start(**overrides):
        broker = start_broker(overrides=overrides)
        started.append(broker)
        return broker

    yield start
    for broker in started:
        broker.close()


def _open(broker, count: int) -> list[RawConnection]:
    return [RawConnection(broker.bootstrap) for _ in range(count)]


def _close_all(conns) -> None:
    for conn in conns:
        conn.close()


def test_max_connections_per_ip_closes_the_excess_connection(broker_with):
    broker = broker_with(**{"max.connections.per.ip": 3})
    conns = _open(broker, 3)
    try:
        assert all(_served(c) for c in conns)
        extra = RawConnection(broker.bootstrap)
        assert extra.wait_closed(5.0), "the 4th connection from one IP must be closed"
        extra.close()
        conns.pop().close()  # a slot frees once a connection closes
        time.sleep(0.2)
        again = RawConnection(broker.bootstrap)
        conns.append(again)
        assert _served(again)
    finally:
        _close_all(conns)


def test_max_connections_per_ip_overrides_by_host_name(broker_with):
    broker = broker_with(**{"max.connections.per.ip": 100, "max.connections.per.ip.overrides": "localhost:2"})
    conns = _open(broker, 2)
    try:
        assert all(_served(c) for c in conns)
        extra = RawConnection(broker.bootstrap)
        assert extra.wait_closed(5.0), "localhost (127.0.0.1) is limited to 2 by the override"
        extra.close()
    finally:
        _close_all(conns)


def test_max_connections_per_ip_is_dynamic(broker_with):
    broker = broker_with()
    admin = admin_api.AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = admin_api.ConfigResource(
        admin_api.ResourceType.BROKER, "1",
        incremental_configs=[admin_api.ConfigEntry(
            "max.connections.per.ip", "2", incremental_operation=admin_api.AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(10)
    # the admin client's own connections count too, so of three more at least one is closed
    conns = _open(broker, 3)
    try:
        served = [_served(c, timeout=3.0) for c in conns]
        assert 0 < served.count(False) and served.count(True) <= 2, served
    finally:
        _close_all(conns)
        del admin


@pytest.mark.parametrize("limit", ["max.connections", "listener.name.plaintext.max.connections"])
def test_max_connections_makes_new_connections_wait_for_a_slot(broker_with, limit):
    broker = broker_with(**{limit: 2})
    conns = _open(broker, 2)
    try:
        assert all(_served(c) for c in conns)
        waiting = RawConnection(broker.bootstrap)
        conns.append(waiting)
        assert not _served(waiting, timeout=1.0), "over max.connections a new connection is not read"
        conns[0].close()
        waiting.sock.settimeout(5.0)
        waiting.receive()  # the request sent above is answered once a slot frees
    finally:
        _close_all(conns)


def test_max_connection_creation_rate_delays_new_connections(broker_with):
    broker = broker_with(**{"max.connection.creation.rate": 5})
    started = time.monotonic()
    conns = _open(broker, 15)
    try:
        for conn in conns:
            assert _served(conn, timeout=10.0)
        elapsed = time.monotonic() - started
        # a burst of 5, then 5 per second: the 15th is admitted about 2 s after the first
        assert 1.5 <= elapsed < 8.0, elapsed
    finally:
        _close_all(conns)


def test_connections_max_idle_ms_closes_idle_connections_only(broker_with):
    broker = broker_with(**{"connections.max.idle.ms": 1000})
    idle, busy = _open(broker, 2)
    try:
        assert _served(idle) and _served(busy)
        deadline = time.monotonic() + 2.5
        while time.monotonic() < deadline:
            assert _served(busy), "a connection with traffic is never idle"
            time.sleep(0.3)
        assert idle.wait_closed(3.0), "a connection idle for more than connections.max.idle.ms is closed"
    finally:
        _close_all([idle, busy])
