"""Which broker's registry writes: a leader elected through a Kafka group, as Confluent's registries do.

Every registry joins the group `kafkapy.schema.registry.group.id` (Confluent's schema.registry.group.id)
with protocol type "sr" and protocol "v0"; its member metadata is Confluent's identity JSON
{"version":1,"host","port","scheme","master_eligibility"}. The group's leader assigns: the current
registry leader while it is still a member, else the eligible member with the lowest URL; every
member gets {"version":1,"error":0,"master":member id,"master_identity":identity} from SyncGroup.
The leader assigns ids and writes `_schemas`; the others forward writes to it over HTTP. A member
that stops heartbeating (its broker died) is dropped by the group coordinator after the session
timeout, the group rebalances and another registry leads; the new leader reads `_schemas` to its end
before each write, so it continues after the highest id written by the old one.

A broker that is a single node (ClusterOfOne) is its own leader without a group: no other registry
can exist there, and the group's first-rebalance delay (group.initial.rebalance.delay.ms) would hold
its first registration for seconds.
"""
from __future__ import annotations

import asyncio
import json
import logging

from ..net.client import BrokerConnectionError
from ..net.peers import PeerConnections
from ..protocol.error_codes import ErrorCode
from ..protocol.messages import (
    FindCoordinatorRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    SyncGroupRequest,
)
from ..security.inter_broker import inter_broker_options

__all__ = ["LeaderElector"]

log = logging.getLogger(__name__)

PROTOCOL_TYPE = "sr"
PROTOCOL = "v0"
SESSION_TIMEOUT_MS = 10_000
REBALANCE_TIMEOUT_MS = 30_000
HEARTBEAT_S = 2.0


def _url(identity: dict) -> str:
    return f"{identity.get('scheme', 'http')}://{identity.get('host')}:{identity.get('port')}"


class LeaderElector:
    def __init__(self, broker, group_id: str, host: str, port: int, scheme: str = "http"):
        self.broker = broker
        self.group_id = group_id
        self.identity = {"version": 1, "host": host, "port": port, "scheme": scheme, "master_eligibility": True}
        self.own_url = _url(self.identity)
        self.leader_url: str | None = None
        self.changed = asyncio.Event()
        self.single = getattr(broker.cluster, "mode", "") == "single node"
        self._peers = PeerConnections(
            "schema-registry-group", lambda node_id: broker.metadata.broker_endpoint(node_id),
            client_id=f"kafkapy-schema-registry-group-{broker.node_id}",
            request_timeout_s=REBALANCE_TIMEOUT_MS / 1000 + 10, **inter_broker_options(broker.config))
        self.member_id = ""
        self.generation = -1
        self.coordinator = -1
        self._task: asyncio.Task | None = None

    @property
    def is_leader(self) -> bool:
        return self.leader_url == self.own_url

    def start(self) -> None:
        if self.single:
            self._set_leader(self.own_url)
            return
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
            if self.member_id and self.coordinator >= 0:
                try:
                    await asyncio.wait_for(self._peers.send(self.coordinator, LeaveGroupRequest(
                        group_id=self.group_id, members=[LeaveGroupRequest.MemberIdentity(
                            member_id=self.member_id, group_instance_id=None)]), 3), 2)
                except (BrokerConnectionError, asyncio.TimeoutError, Exception):
                    pass
        self._peers.close()

    async def wait_for_leader(self, timeout_s: float) -> str | None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while self.leader_url is None and loop.time() < deadline:
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), deadline - loop.time())
            except asyncio.TimeoutError:
                break
        return self.leader_url

    def _set_leader(self, url: str | None) -> None:
        if url != self.leader_url:
            log.info("schema registry: leader is now %s%s", url or "unknown",
                     " (this broker)" if url == self.own_url else "")
        self.leader_url = url
        self.changed.set()

    # -- the membership loop ---------------------------------------------------------------
    async def _run(self) -> None:
        while True:
            try:
                await self._join_and_sync()
                while await self._heartbeat():
                    await asyncio.sleep(HEARTBEAT_S)
            except asyncio.CancelledError:
                raise
            except (BrokerConnectionError, _Retry) as exc:
                log.debug("schema registry group: %s", exc)
                self.coordinator = -1
                await asyncio.sleep(0.5)
            except Exception:
                log.exception("schema registry group: membership failed")
                self.coordinator = -1
                await asyncio.sleep(1.0)

    async def _find_coordinator(self) -> int:
        response = await self._peers.send(self.broker.node_id, FindCoordinatorRequest(key=self.group_id, key_type=0), 3)
        if response.error_code:
            raise _Retry(f"FindCoordinator error {response.error_code}")
        return response.node_id

    async def _join_and_sync(self) -> None:
        if self.coordinator < 0:
            self.coordinator = await self._find_coordinator()
        metadata = json.dumps(self.identity).encode()
        join = await self._peers.send(self.coordinator, JoinGroupRequest(
            group_id=self.group_id, session_timeout_ms=SESSION_TIMEOUT_MS, rebalance_timeout_ms=REBALANCE_TIMEOUT_MS,
            member_id=self.member_id, group_instance_id=None, protocol_type=PROTOCOL_TYPE,
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name=PROTOCOL, metadata=metadata)]), 5)
        if join.error_code == ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id = join.member_id
            raise _Retry("member id assigned")
        if join.error_code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
            self.member_id = ""
            raise _Retry(f"JoinGroup error {join.error_code}")
        if join.error_code:
            if join.error_code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
                self.coordinator = -1
            raise _Retry(f"JoinGroup error {join.error_code}")
        self.member_id, self.generation = join.member_id, join.generation_id
        assignments = []
        if join.leader == self.member_id:
            assignments = self._assign(join.members)
        sync = await self._peers.send(self.coordinator, SyncGroupRequest(
            group_id=self.group_id, generation_id=self.generation, member_id=self.member_id, group_instance_id=None,
            protocol_type=PROTOCOL_TYPE, protocol_name=PROTOCOL, assignments=assignments), 5)
        if sync.error_code:
            if sync.error_code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
                self.member_id = ""
            raise _Retry(f"SyncGroup error {sync.error_code}")
        try:
            assignment = json.loads(bytes(sync.assignment))
            identity = assignment.get("master_identity")
        except (ValueError, AttributeError):
            identity = None
        self._set_leader(_url(identity) if isinstance(identity, dict) else None)

    def _assign(self, members) -> list:
        identities = {}
        for member in members:
            try:
                identity = json.loads(bytes(member.metadata))
            except ValueError:
                continue
            if isinstance(identity, dict) and identity.get("master_eligibility", True):
                identities[member.member_id] = identity
        chosen = None
        for member_id, identity in identities.items():
            if _url(identity) == self.leader_url:  # keep the current leader while it is a member
                chosen = member_id
        if chosen is None and identities:
            chosen = min(identities, key=lambda m: _url(identities[m]))
        value = {"version": 1, "error": 0 if chosen else 1, "master": chosen,
                 "master_identity": identities.get(chosen)}
        encoded = json.dumps(value).encode()
        return [SyncGroupRequest.SyncGroupRequestAssignment(member_id=m.member_id, assignment=encoded)
                for m in members]

    async def _heartbeat(self) -> bool:
        response = await self._peers.send(self.coordinator, HeartbeatRequest(
            group_id=self.group_id, generation_id=self.generation, member_id=self.member_id,
            group_instance_id=None), 3)
        if response.error_code == 0:
            return True
        if response.error_code in (ErrorCode.UNKNOWN_MEMBER_ID,):
            self.member_id = ""
        if response.error_code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
            self.coordinator = -1
        return False


class _Retry(Exception):
    pass
