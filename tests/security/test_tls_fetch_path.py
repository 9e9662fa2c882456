"""The fetch path on a TLS connection: segment slices go through the transport in bounded pieces
read with pread (no sendfile on the socket), byte-exact and in order, waiting for the transport to
drain between pieces; plaintext connections still use sendfile."""
from __future__ import annotations

import asyncio
import os
from types import SimpleNamespace

from kafkapy.broker import connection as connection_module
from kafkapy.broker.connection import ConnectionServices, KafkaConnection
from kafkapy.broker.memory_pool import MemoryPool
from kafkapy.log.file_slice import FileSlice


class FakeTransport(asyncio.Transport):
    def __init__(self, protocol, tls: bool, pause_above: int):
        super().__init__()
        self.protocol = protocol
        self.tls = tls
        self.pause_above = pause_above
        self.writes: list[bytes] = []
        self.buffered = 0
        self.max_buffered = 0
        self.closed = False

    def get_extra_info(self, name, default=None):
        if name == "ssl_object":
            return SimpleNamespace(getpeercert=lambda binary_form=False: None, version=lambda: "TLSv1.3",
                                   cipher=lambda: ("TLS_AES_256_GCM_SHA384", "TLSv1.3", 256),
                                   context=None) if self.tls else None
        if name == "peername":
            return ("127.0.0.1", 5555)
        return default

    def write(self, data):
        data = bytes(data)
        self.writes.append(data)
        self.buffered += len(data)
        self.max_buffered = max(self.max_buffered, self.buffered)
        if self.buffered > self.pause_above:
            self.protocol.pause_writing()
            asyncio.get_running_loop().call_soon(self.drain)

    def drain(self):
        self.buffered = 0
        self.protocol.resume_writing()

    def get_write_buffer_size(self):
        return self.buffered

    def close(self):
        self.closed = True


def _broker():
    broker = SimpleNamespace(config=SimpleNamespace(get=lambda name: 100 * 1024 * 1024), connections=set(),
                             memory_pool=MemoryPool(2**62),
                             connection_quotas=SimpleNamespace(on_connect=lambda conn, listener, ip: None,
                                                               on_close=lambda conn: None))
    return ConnectionServices(broker, broker.connections, broker.memory_pool, broker.connection_quotas)


def test_tls_connection_writes_slices_in_bounded_pieces(tmp_path):
    data = os.urandom(5 * 1024 * 1024 + 12345)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"x" * 100 + data)
    listener = SimpleNamespace(name="SSL", security_protocol="SSL")
    conn = KafkaConnection(_broker(), listener)
    with open(path, "rb", buffering=0) as f:
        part = FileSlice(f, 100, len(data))

        async def run():
            transport = FakeTransport(conn, tls=True, pause_above=64 * 1024)
            conn.connection_made(transport)
            assert conn._sock_fd is None
            await conn._write([b"header", part, b"trailer"])
            return transport

        transport = asyncio.run(run())
    out = b"".join(transport.writes)
    size = len(b"header") + len(data) + len(b"trailer")
    assert out == size.to_bytes(4, "big") + b"header" + data + b"trailer"
    assert max(len(w) for w in transport.writes) <= connection_module._TLS_CHUNK_BYTES
    # bounded: the transport never held more than one piece plus what it had before
    assert transport.max_buffered <= connection_module._TLS_CHUNK_BYTES + 64 * 1024 + 16
    assert str(conn.principal) == "User:ANONYMOUS"


def test_plaintext_connection_keeps_its_socket_fd():
    import socket

    left, right = socket.socketpair()
    try:
        conn = KafkaConnection(_broker(), SimpleNamespace(name="PLAINTEXT", security_protocol="PLAINTEXT"))
        transport = FakeTransport(conn, tls=False, pause_above=1 << 30)
        transport.get_extra_info = lambda name, default=None: left if name == "socket" else (
            ("127.0.0.1", 1) if name == "peername" else None)
        conn.connection_made(transport)
        assert conn._sock_fd == left.fileno()
    finally:
        left.close()
        right.close()
