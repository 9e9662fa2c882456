"""MemoryPool (queued.max.request.bytes) and ConnectionQuotas' pure parts, and PeerLogThrottle."""
from __future__ import annotations

import logging

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy.broker.connection_quotas import _TokenBucket, parse_ip_overrides
from kafkapy.broker.log_throttle import PeerLogThrottle, peer_ip
from kafkapy.broker.memory_pool import AUTO_MAX_BYTES, READ_CHUNK, MemoryPool, pool_capacity


class Waiter:
    def __init__(self):
        self.resumed = 0

    def resume_after_memory(self):
        self.resumed += 1


def test_pool_capacity_is_bounded_even_when_kafka_would_not_be():
    assert pool_capacity(512, 100) == 512
    auto = pool_capacity(-1, 100)
    assert 100 <= auto <= AUTO_MAX_BYTES
    assert pool_capacity(-1, AUTO_MAX_BYTES * 2) == AUTO_MAX_BYTES * 2  # one largest request always fits


def test_release_resumes_waiters_in_order_a_few_at_a_time():
    pool = MemoryPool(4 * READ_CHUNK)
    pool.charge(5 * READ_CHUNK)
    assert pool.exhausted
    waiters = [Waiter() for _ in range(10)]
    for w in waiters:
        pool.wait(w)
    pool.release(READ_CHUNK)  # back at capacity: nobody resumed yet
    assert [w.resumed for w in waiters] == [0] * 10
    pool.release(2 * READ_CHUNK)  # room for two reads
    assert [w.resumed for w in waiters] == [1, 1] + [0] * 8
    pool.forget(waiters[2])
    pool.release(2 * READ_CHUNK)
    assert [w.resumed for w in waiters][:6] == [1, 1, 0, 1, 1, 1]
    assert pool.used == 0 and pool.peak == 5 * READ_CHUNK


@settings(suppress_health_check=[HealthCheck.too_slow])  # a loaded machine is not a failure here
@given(st.lists(st.integers(1, 10_000), max_size=50))
def test_charge_and_release_balance(sizes):
    pool = MemoryPool(10_000)
    for n in sizes:
        pool.charge(n)
    for n in sizes:
        pool.release(n)
    assert pool.used == 0


def test_ip_overrides_parse_hosts_and_ips():
    names = {"localhost": "127.0.0.1", "broker-a": "10.0.0.7"}
    resolve = lambda host: names.get(host, host)  # noqa: E731
    assert parse_ip_overrides("localhost:2, 10.1.2.3:0,broker-a:7", resolve) == {
        "127.0.0.1": 2, "10.1.2.3": 0, "10.0.0.7": 7}
    assert parse_ip_overrides("", resolve) == {}
    assert parse_ip_overrides("[::1]:4", lambda h: h) == {"::1": 4}
    for bad in ("localhost", "localhost:x", ":3", "h:-1"):
        with pytest.raises(ValueError):
            parse_ip_overrides(bad, lambda h: h)


def test_token_bucket_allows_a_burst_then_the_rate():
    bucket = _TokenBucket(5, now=0.0)
    for _ in range(5):
        assert bucket.delay(5, 0.0) == 0
        bucket.take()
    assert bucket.delay(5, 0.0) == pytest.approx(0.2)
    assert bucket.delay(5, 0.2) == pytest.approx(0.0)


class _Records(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(record.getMessage())


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["10.0.0.1", "10.0.0.2", "::1"]), st.floats(0, 5)), max_size=300))
def test_throttled_lines_and_aggregate_counts_add_up(events):
    logger = logging.getLogger("test-throttle")
    logger.propagate = False
    handler = _Records()
    logger.handlers = [handler]
    clock = [0.0]
    throttle = PeerLogThrottle(logger, first=3, interval_s=60.0, global_first=7, clock=lambda: clock[0])
    for ip, step in events:
        clock[0] += step
        throttle.warning(ip, "bad frame from %s", ip)
    throttle.flush_all()
    individual = [line for line in handler.lines if line.startswith("bad frame")]
    aggregated = sum(int(line.split()[0]) for line in handler.lines if "more warnings" in line)
    assert len(individual) + aggregated == len(events)
    windows = max(1, int(clock[0] // 60) + 2)
    assert len(individual) <= 7 * windows


def test_peer_ip():
    assert peer_ip("127.0.0.1:5555") == "127.0.0.1"
    assert peer_ip("::1:5555") == "::1"
    assert peer_ip("?") == "?"


def test_overrides_config_is_validated_as_kafka_does():
    from kafkapy.broker.config import BrokerConfig
    from kafkapy.broker.config_defs import ConfigError

    assert BrokerConfig({"max.connections.per.ip.overrides": "localhost:2,[::1]:0"}).get(
        "max.connections.per.ip.overrides") == "localhost:2,[::1]:0"
    for bad in ("localhost", "localhost:x", ":3", "h:-1"):
        with pytest.raises(ConfigError):
            BrokerConfig({"max.connections.per.ip.overrides": bad})
