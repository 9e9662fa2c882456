"""KafkaConnection cuts any split of the byte stream into the same frames, and charges the memory
pool exactly the bytes it holds."""
from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.broker.connection import ConnectionServices, KafkaConnection
from kafkapy.broker.memory_pool import MemoryPool


class _Config:
    def get(self, name):
        return {"socket.request.max.bytes": 1 << 20}.get(name)


class _Broker:
    def __init__(self, capacity):
        self.config = _Config()
        self.memory_pool = MemoryPool(capacity)
        self.connections = set()
        self.connection_quotas = _NoQuotas()
        self.connection_services = ConnectionServices(self, self.connections, self.memory_pool,
                                                      self.connection_quotas)


class _NoQuotas:
    def on_connect(self, conn, listener_name, ip):
        pass

    def on_close(self, conn):
        pass


class _Transport:
    def __init__(self):
        self.paused = False
        self.closed = False

    def pause_reading(self):
        self.paused = True

    def resume_reading(self):
        self.paused = False

    def close(self):
        self.closed = True


def _connection(capacity=1 << 30):
    broker = _Broker(capacity)
    conn = KafkaConnection(broker.connection_services)
    conn.transport = _Transport()
    conn._worker = object()  # nothing is processed: the test looks at the queued frames
    return broker, conn


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=300), max_size=8), st.lists(st.integers(1, 400), max_size=30), st.binary(max_size=3))
def test_any_split_gives_the_same_frames(bodies, cuts, tail):
    stream = b"".join(struct.pack(">i", len(b)) + b for b in bodies) + tail
    broker, conn = _connection()
    pos = 0
    for cut in cuts + [len(stream)]:
        if pos >= len(stream):
            break
        conn.data_received(stream[pos:pos + cut])
        pos += cut
    assert list(conn._frames) == bodies
    assert conn._held == sum(len(b) for b in bodies) == broker.memory_pool.used
    assert not conn.transport.closed


def test_large_frames_reserve_small_ones_keep_flowing_and_release_resumes_waiters():
    broker, a = _connection(capacity=100_000)
    pool = broker.memory_pool

    def another():
        conn = KafkaConnection(broker.connection_services)
        conn.transport = _Transport()
        conn._worker = object()
        return conn

    b, c = another(), another()
    # A's large request reserves its whole announced size while the pool has room (as Kafka's pool)
    a.data_received(struct.pack(">i", 500_000) + bytes(50_000))
    assert pool.used == 500_000 and not a.transport.paused
    # B's large request finds the pool full: it holds only what it read and waits
    b.data_received(struct.pack(">i", 200_000) + bytes(10_000))
    assert pool.used == 510_000 and b.transport.paused and pool.waiting == 1
    # C's small requests still flow
    c.data_received(struct.pack(">i", 1_000) + bytes(1_000))
    assert list(c._frames) == [bytes(1_000)] and not c.transport.paused and pool.used == 511_000
    # A completes within its reservation, then its request is handled and released: B gets its turn
    a.data_received(bytes(450_000))
    assert list(a._frames) == [bytes(500_000)] and pool.used == 511_000
    a._frames.popleft()
    a._release(500_000)
    assert not b.transport.paused and b._reserved and pool.used == 201_000
    for conn in (a, b, c):
        conn.connection_lost(None)
    assert pool.used == 0 and pool.waiting == 0


def test_frame_above_socket_request_max_bytes_closes():
    broker, conn = _connection()
    conn.data_received(struct.pack(">i", (1 << 20) + 1) + bytes(10))
    assert conn.transport.closed
