"""Fill __consumer_offsets with many committed offsets and watch a restarted broker load them.

Used by conformance/test_coordinator_loading.py (a small load, in CI) and by
bench/groups/offsets_load.py (1,000,000 commits). The commits go through the wire as
OffsetCommit v8 requests of groups without members, so the records are exactly what kafkapy's
coordinator writes. While the broker loads, one thread sends ApiVersions back to back and
records each round trip; another asks OffsetFetch for a probe group until the committed
offset comes back, counting the COORDINATOR_LOAD_IN_PROGRESS answers before it.
"""
from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

COORDINATOR_LOAD_IN_PROGRESS = 14


def _connect(bootstrap: str, timeout: float) -> socket.socket:
    host, port = bootstrap.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    chunks = []
    while size:
        chunk = sock.recv(min(size, 1 << 20))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _receive(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", _recv_exact(sock, 4))
    return _recv_exact(sock, size)


def _request(request, correlation_id: int, version: int) -> bytes:
    request.with_header(correlation_id=correlation_id, client_id="coordinator-loading")
    return bytes(request.encode(version=version, header=True, framed=True))


def commit_request(group: str, topic: str, partitions: int, offset: int, correlation_id: int) -> bytes:
    from kafka.protocol.consumer.group import OffsetCommitRequest

    T = OffsetCommitRequest.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition
    request = OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="",
        topics=[T(name=topic, partitions=[P(partition_index=p, committed_offset=offset + p,
                                            committed_metadata="") for p in range(partitions)])])
    return _request(request, correlation_id, 8)


def fill_offsets(bootstrap: str, topic: str, groups: int, partitions: int, offset: int = 1000,
                 pipeline: int = 32, group_prefix: str = "load-group-") -> int:
    """Commit `offset + p` for every partition p of `topic` in `groups` groups; returns the
    number of records written (groups * partitions). Requests are pipelined on one connection."""
    from kafka.protocol.consumer.group import OffsetCommitResponse

    from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse

    sock = _connect(bootstrap, 60)
    try:
        # FindCoordinator creates __consumer_offsets; wait until a commit is accepted
        deadline = time.monotonic() + 30
        while True:
            sock.sendall(_request(FindCoordinatorRequest(key_type=0, coordinator_keys=[f"{group_prefix}0"]), 0, 4))
            found = FindCoordinatorResponse.decode(_receive(sock), version=4, header=True)
            if found.coordinators[0].error_code == 0:
                sock.sendall(commit_request(f"{group_prefix}0", topic, partitions, offset, 0))
                response = OffsetCommitResponse.decode(_receive(sock), version=8, header=True)
                if {p.error_code for t in response.topics for p in t.partitions} == {0}:
                    break
            if time.monotonic() > deadline:
                raise AssertionError("the broker did not accept offset commits")
            time.sleep(0.05)
        sent = received = 1
        while received < groups:
            while sent < groups and sent - received < pipeline:
                sock.sendall(commit_request(f"{group_prefix}{sent}", topic, partitions, offset, sent))
                sent += 1
            response = OffsetCommitResponse.decode(_receive(sock), version=8, header=True)
            errors = {p.error_code for t in response.topics for p in t.partitions}
            if errors != {0}:
                raise AssertionError(f"OffsetCommit failed with {errors}")
            received += 1
    finally:
        sock.close()
    return groups * partitions


def offset_fetch(sock: socket.socket, group: str, topic: str, partition: int, correlation_id: int
                 ) -> tuple[int, int]:
    """(error code, committed offset) of one partition from OffsetFetch v8."""
    from kafka.protocol.consumer.group import OffsetFetchRequest, OffsetFetchResponse

    G = OffsetFetchRequest.OffsetFetchRequestGroup
    request = OffsetFetchRequest(groups=[G(group_id=group, topics=[
        G.OffsetFetchRequestTopics(name=topic, partition_indexes=[partition])])], require_stable=False)
    sock.sendall(_request(request, correlation_id, 8))
    response = OffsetFetchResponse.decode(_receive(sock), version=8, header=True)
    [answer] = response.groups
    if answer.error_code:
        return answer.error_code, -1
    [t] = answer.topics
    [p] = t.partitions
    return p.error_code, p.committed_offset


@dataclass
class LoadObservation:
    """What a client saw while a restarted broker loaded its coordinator state (times in s,
    from the restart)."""

    first_api_versions: float | None = None
    offsets_ready: float | None = None
    api_versions_rtts: list[tuple[float, float]] = field(default_factory=list)  # (sent at, round trip)
    load_in_progress_answers: int = 0
    other_errors: list[int] = field(default_factory=list)
    committed: int | None = None
    # `while_loading` ran from this time to this one, and OffsetFetch still answered
    # COORDINATOR_LOAD_IN_PROGRESS afterwards (so it ran during the load) when the flag is set
    while_loading_span: tuple[float, float] | None = None
    while_loading_confirmed: bool = False

    def rtts_during_load(self) -> list[float]:
        """Round trips of the ApiVersions sent after the first answer (the broker serves) and
        before the offsets were there."""
        end = self.offsets_ready if self.offsets_ready is not None else float("inf")
        begin = self.first_api_versions if self.first_api_versions is not None else end
        return [rtt for sent, rtt in self.api_versions_rtts if begin <= sent < end]

    @staticmethod
    def percentile(values: list[float], q: float) -> float:
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def observe_load(bootstrap: str, group: str, topic: str, partition: int, started: float,
                 timeout: float = 120.0, poll_s: float = 0.005,
                 while_loading: Callable[[], None] | None = None) -> LoadObservation:
    """Probe a broker started at `started` (time.monotonic()) until OffsetFetch for `group`
    answers without error or `timeout` passes. `while_loading` is called once, right after the
    first COORDINATOR_LOAD_IN_PROGRESS answer (e.g. to produce to another topic)."""
    from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse

    seen = LoadObservation()
    stop = threading.Event()
    deadline = started + timeout

    def connect() -> socket.socket:
        while True:
            try:
                return _connect(bootstrap, timeout)  # a blocked broker answers after the whole load
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def api_versions_loop() -> None:
        sock = connect()
        try:
            cid = 0
            while not stop.is_set() and time.monotonic() < deadline:
                cid += 1
                sent = time.monotonic()
                sock.sendall(_request(ApiVersionsRequest(client_software_name="probe",
                                                         client_software_version="1"), cid, 3))
                ApiVersionsResponse.decode(_receive(sock), version=3, header=True)
                now = time.monotonic()
                if seen.first_api_versions is None:
                    seen.first_api_versions = now - started
                seen.api_versions_rtts.append((sent - started, now - sent))
                time.sleep(0.001)
        finally:
            sock.close()

    prober = threading.Thread(target=api_versions_loop, daemon=True)
    prober.start()
    sock = connect()
    try:
        cid = 0
        while time.monotonic() < deadline:
            cid += 1
            error, committed = offset_fetch(sock, group, topic, partition, cid)
            if error == 0:
                seen.offsets_ready = time.monotonic() - started
                seen.committed = committed
                break
            if error == COORDINATOR_LOAD_IN_PROGRESS:
                seen.load_in_progress_answers += 1
                if seen.while_loading_span is not None and not seen.while_loading_confirmed:
                    seen.while_loading_confirmed = True
                if while_loading is not None and seen.while_loading_span is None:
                    begin = time.monotonic() - started
                    while_loading()
                    seen.while_loading_span = (begin, time.monotonic() - started)
            else:
                seen.other_errors.append(error)
            time.sleep(poll_s)
    finally:
        sock.close()
        stop.set()
        prober.join(30)
    return seen
