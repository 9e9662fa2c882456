"""The peer-connection layer (net/peers.py) against real sockets: tiny asyncio servers that speak
the Kafka framing and answer AllocateProducerIds (flexible: request header v2, response header v1)
with a producer id block that names the server, so each test sees which endpoint answered."""
from __future__ import annotations

import asyncio
import struct

import pytest

from kafkapy.net.client import BrokerConnectionError
from kafkapy.net.peers import PeerConnections, PeerUnavailableError
from kafkapy.protocol.headers import decode_request_header, encode_response_header
from kafkapy.protocol.messages import (
    REQUEST_TYPES,
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
)


class TinyBroker:
    """Answers AllocateProducerIds with producer_id_start = its tag; counts and can drop connections."""

    def __init__(self, tag: int):
        self.tag = tag
        self.accepted = 0
        self.requests = 0
        self._writers: list[asyncio.StreamWriter] = []
        self._server: asyncio.base_events.Server | None = None
        self.port = 0

    async def start(self) -> TinyBroker:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    @property
    def endpoint(self) -> tuple[str, int]:
        return "127.0.0.1", self.port

    @property
    def open_connections(self) -> int:
        return sum(1 for w in self._writers if not w.is_closing())

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        self._writers.append(writer)
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                frame = await reader.readexactly(size)
                header, pos = decode_request_header(frame)
                request = REQUEST_TYPES[header.api_key].decode(frame, header.api_version, pos)
                assert isinstance(request, AllocateProducerIdsRequest)
                self.requests += 1
                response = AllocateProducerIdsResponse(producer_id_start=self.tag, producer_id_len=request.broker_id)
                payload = encode_response_header(header.correlation_id, header.api_key, header.api_version) + \
                    response.encode(header.api_version)
                writer.write(struct.pack(">i", len(payload)) + payload)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def drop_connections(self) -> None:
        for writer in self._writers:
            writer.close()

    async def stop(self) -> None:
        self.drop_connections()
        self._server.close()
        await self._server.wait_closed()


async def ask(peers: PeerConnections, node_id: int | None = None) -> int:
    """Which server answered (its tag)."""
    request = AllocateProducerIdsRequest(broker_id=7, broker_epoch=1)
    if node_id is None:
        response = await peers.send_to_controller(request, 0)
    else:
        response = await peers.send(node_id, request, 0)
    assert response.producer_id_len == 7
    return response.producer_id_start


async def wait_until(condition, timeout_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached"
        await asyncio.sleep(0.01)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 30))


def test_send_reaches_the_node_and_reuses_its_connection():
    async def scenario():
        a, b = await TinyBroker(100).start(), await TinyBroker(200).start()
        peers = PeerConnections("test", {1: a.endpoint, 2: b.endpoint}.get, request_timeout_s=5)
        try:
            assert [await ask(peers, 1), await ask(peers, 2), await ask(peers, 1)] == [100, 200, 100]
            assert (a.accepted, b.accepted, a.requests) == (1, 1, 2)
            assert peers.nodes == [1, 2]
        finally:
            peers.close()
            await a.stop()
            await b.stop()
    run(scenario())


def test_retargets_when_a_node_registers_at_another_endpoint():
    async def scenario():
        old, new = await TinyBroker(100).start(), await TinyBroker(200).start()
        endpoints = {1: old.endpoint}
        peers = PeerConnections("test", endpoints.get, request_timeout_s=5)
        try:
            assert await ask(peers, 1) == 100
            endpoints[1] = new.endpoint   # broker 1 re-registered elsewhere
            assert await ask(peers, 1) == 200
            await wait_until(lambda: old.open_connections == 0)   # the old socket was closed
            assert (old.accepted, new.accepted) == (1, 1)
        finally:
            peers.close()
            await old.stop()
            await new.stop()
    run(scenario())


def test_reconnects_after_the_peer_closed_the_connection():
    async def scenario():
        server = await TinyBroker(100).start()
        peers = PeerConnections("test", {1: server.endpoint}.get, request_timeout_s=5)
        try:
            assert await ask(peers, 1) == 100
            server.drop_connections()
            await wait_until(lambda: not peers.connection(1).connected)
            assert await ask(peers, 1) == 100
            assert server.accepted == 2
        finally:
            peers.close()
            await server.stop()
    run(scenario())


def test_a_peer_that_is_down_fails_the_send_and_the_next_one_reconnects():
    async def scenario():
        server = await TinyBroker(100).start()
        port = server.port
        peers = PeerConnections("test", {1: ("127.0.0.1", port)}.get, request_timeout_s=5, connect_timeout_s=2)
        try:
            assert await ask(peers, 1) == 100
            await server.stop()
            with pytest.raises(BrokerConnectionError):
                await ask(peers, 1)
            restarted = TinyBroker(300)
            restarted._server = await asyncio.start_server(restarted._serve, "127.0.0.1", port)
            restarted.port = port
            assert await ask(peers, 1) == 300
            await restarted.stop()
        finally:
            peers.close()
    run(scenario())


def test_send_to_controller_follows_the_controller():
    async def scenario():
        a, b = await TinyBroker(100).start(), await TinyBroker(200).start()
        controller = {"id": -1}
        peers = PeerConnections("test", {1: a.endpoint, 2: b.endpoint}.get,
                                controller_id=lambda: controller["id"], request_timeout_s=5)
        try:
            with pytest.raises(PeerUnavailableError):
                await ask(peers)
            controller["id"] = 1
            assert await ask(peers) == 100
            controller["id"] = 2   # the controller moved
            assert await ask(peers) == 200
            assert peers.nodes == [2]   # the channel to the former controller is closed
            await wait_until(lambda: a.open_connections == 0)
            controller["id"] = 1   # and back
            assert await ask(peers) == 100
            assert a.accepted == 2 and peers.nodes == [1]
        finally:
            peers.close()
            await a.stop()
            await b.stop()
    run(scenario())


def test_unknown_node_sends_nothing():
    async def scenario():
        peers = PeerConnections("test", {}.get)
        with pytest.raises(PeerUnavailableError) as caught:
            await ask(peers, 5)
        assert caught.value.node_id == 5 and peers.nodes == []
        peers.close()
    run(scenario())
