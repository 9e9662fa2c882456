"""KafkaConnection cuts any split of the byte stream into the same frames, and charges the memory
pool exactly the bytes it holds."""
from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.broker.connection import KafkaConnection
from kafkapy.broker.memory_pool import MemoryPool


class _Config:
    def get(self, name):
        return {"socket.request.max.bytes": 1 << 20}.get(name)


class _Broker:
    def __init__(self, capacity):
        self.config = _Config()
        self.memory_pool = MemoryPool(capacity)
        self.connections = set()


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
    conn = KafkaConnection(broker)
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


def test_partial_frame_is_charged_as_it_arrives_and_pauses_over_budget():
    broker, conn = _connection(capacity=100_000)
    conn.data_received(struct.pack(">i", 500_000) + bytes(50_000))
    assert broker.memory_pool.used == 50_000 and not conn.transport.paused  # within the small allowance
    conn.data_received(bytes(60_000))
    assert broker.memory_pool.used == 110_000 and conn.transport.paused
    conn.connection_lost(None)
    assert broker.memory_pool.used == 0 and broker.memory_pool.waiting == 0


def test_frame_above_socket_request_max_bytes_closes():
    broker, conn = _connection()
    conn.data_received(struct.pack(">i", (1 << 20) + 1) + bytes(10))
    assert conn.transport.closed
