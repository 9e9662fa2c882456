"""Broker memory stays bounded whatever clients send (queued.max.request.bytes, memory_pool.py).

1,000 connections each announce a 100 MB request and send its first MiB, then stall. Kafka would
reserve 100 MB for each of them as its budget allows (and with the default unbounded budget,
all of them: 100 GB); kafkapy holds only what arrived, pauses the connections that hold large
partial frames once the pool is full, and keeps serving small requests of other clients.
"""
from __future__ import annotations

import resource
import socket
import struct
import time
import uuid

import pytest

from conformance.broker_process import start_broker
from kafkapy.broker import memory_pool

confluent_kafka = pytest.importorskip("confluent_kafka")

MiB = 1024 * 1024
CONNECTIONS = 1000
ANNOUNCED = 100 * 1000 * 1000  # the first part of a 100 MB request (socket.request.max.bytes is 104857600)
SENT = 1 * MiB
# kafkapy's default budget on a machine with >= 2 GiB of memory: 256 MiB (memory_pool.AUTO_MAX_BYTES)
DEFAULT_BUDGET = 256 * MiB
RSS_BOUND = DEFAULT_BUDGET + 200 * MiB


def _status_kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"{field} not in /proc/{pid}/status")


def _raise_fd_limit(needed: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        if hard != resource.RLIM_INFINITY and hard < needed:
            pytest.skip(f"needs {needed} open files, the hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))


def _round_trip(bootstrap: str, topic: str, value: bytes, timeout: float = 20.0) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "message.max.bytes": 2 * MiB,
                                        "socket.timeout.ms": 10000})
    producer.produce(topic, value)
    assert producer.flush(timeout) == 0, "produce did not complete"
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4()}",
                                        "auto.offset.reset": "earliest", "fetch.max.bytes": 4 * MiB})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                assert message.value() == value
                return
        raise AssertionError("consume did not complete")
    finally:
        consumer.close()


def test_thousand_stalled_large_requests_keep_memory_bounded():
    _raise_fd_limit(CONNECTIONS + 512)
    broker = start_broker(overrides={"auto.create.topics.enable": "true"})
    hostile: list[socket.socket] = []
    try:
        pid = broker.pid
        baseline = _status_kib(pid, "VmRSS") * 1024
        header = struct.pack(">i", ANNOUNCED)
        body = b"\x00" * SENT
        for _ in range(CONNECTIONS):
            sock = socket.create_connection(("127.0.0.1", broker.port), timeout=10)
            sock.sendall(header + body)
            hostile.append(sock)
        time.sleep(1.0)  # let the broker read what it will
        # small requests of a real client are still served
        _round_trip(broker.bootstrap, "memory-bound-small", b"x" * 100)
        peak = _status_kib(pid, "VmHWM") * 1024
        during = _status_kib(pid, "VmRSS") * 1024
        print(f"baseline RSS {baseline / MiB:.0f} MiB, RSS with {CONNECTIONS} stalled 100 MB requests "
              f"{during / MiB:.0f} MiB, peak {peak / MiB:.0f} MiB (bound {RSS_BOUND / MiB:.0f} MiB; "
              f"{CONNECTIONS * SENT / MiB:.0f} MiB sent)")
        assert peak < RSS_BOUND
        for sock in hostile:
            sock.close()
        hostile.clear()
        # the budget is released: a request above the small allowance (a ~900 KiB record) goes through
        _round_trip(broker.bootstrap, "memory-bound-large", b"y" * (900 * 1024))
        after = _status_kib(pid, "VmRSS") * 1024
        print(f"RSS after closing them and a 900 KiB round trip: {after / MiB:.0f} MiB")
        assert after < RSS_BOUND
        if memory_pool.malloc_trim() is not None:  # glibc: the freed request buffers went back to the OS
            assert after < baseline + 128 * MiB
        assert broker.is_running()
    finally:
        for sock in hostile:
            sock.close()
        broker.close()


def test_concurrent_large_requests_beyond_the_budget_all_complete():
    """Large requests reserve their size (as Kafka's pool does) so that a started request always
    completes: 24 concurrent 900 KiB produce requests through a 4 MiB budget all succeed."""
    import threading

    from conformance.kafka_wire import RawConnection, encode_batch, parse_produce_v3, produce_request_v3

    broker = start_broker(overrides={"queued.max.request.bytes": 4 * MiB, "auto.create.topics.enable": "true"})
    try:
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
        producer.produce("budget", b"first")  # creates the topic
        assert producer.flush(20) == 0
        request = produce_request_v3(1, "budget", 0, encode_batch([(None, b"z" * (900 * 1024))]), acks=1)
        conns = [RawConnection(broker.bootstrap, timeout=30.0) for _ in range(24)]
        results: list = [None] * len(conns)

        def produce(i: int) -> None:
            try:
                results[i] = parse_produce_v3(conns[i].roundtrip(request))[1][0].error_code
            except Exception as exc:  # reported by the assertion below
                results[i] = repr(exc)

        threads = [threading.Thread(target=produce, args=(i,), daemon=True) for i in range(len(conns))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(40)
        for conn in conns:
            conn.close()
        assert results == [0] * len(conns)
    finally:
        broker.close()
