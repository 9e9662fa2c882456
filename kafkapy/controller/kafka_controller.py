"""The cluster controller, as Kafka 3.7's ZooKeeper-mode KafkaController does it.

Every broker runs one; the broker that creates the ephemeral `/controller` znode (bumping
`/controller_epoch` in the same multi) is the active controller until its session ends. Events
(watch notifications, requests from brokers) are queued and handled one at a time by a single
asyncio task, like Kafka's ControllerEventManager; ZooKeeper calls run in a worker thread. Every
ZooKeeper write is fenced by `/controller_epoch`'s znode version: a write that fails the check means
another broker took over, and this one resigns.

What it does once elected (onControllerFailover): loads brokers, topics and partition states,
sends UpdateMetadata with the live brokers to everyone before any LeaderAndIsr, re-sends the
current LeaderAndIsr (leader epoch not bumped), elects leaders for new and offline partitions, and
resumes topic deletions. Then it reacts to brokers coming and going, topics created, grown and
deleted, and serves AlterPartition, AllocateProducerIds, ControlledShutdown and leader elections.
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from ..protocol.errors import ErrorCode
from .broker_requests import BrokerRequests, NotController
from .channel import ControllerChannel, PartitionInfo, RequestBatch
from ..metadata.ids import new_topic_id
from .log_dir_events import LogDirEvents
from .reassignment import Reassignments
from .leader_election import (NO_LEADER, RECOVERING, new_partition_state, offline_election,
                              remove_replicas_from_isr)
from ..metadata.zk.client import BadVersionError, ControllerMovedError, KafkaZkClient, NodeExistsError
from ..metadata.zk.paths import BrokerRegistration, LeaderIsr, TopicAssignment
from .preferred_leaders import PreferredLeaders
from .topic_events import TopicEvents

__all__ = ["KafkaController"]

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


@dataclass(slots=True)
class _Event:
    name: str
    payload: Any = None
    future: asyncio.Future | None = None


class KafkaController(BrokerRequests, Reassignments, LogDirEvents, TopicEvents, PreferredLeaders):
    """The controller of one broker; active only while it holds `/controller`."""

    def __init__(self, zk: KafkaZkClient, node_id: int, *, listener_name: str,
                 unclean_leader_election: Callable[[str], bool] = lambda topic: False,
                 delete_topic_enable: bool = True, socket_timeout_s: float = 30.0,
                 auto_leader_rebalance: bool = True, rebalance_interval_s: float = 300.0,
                 imbalance_percentage: int = 10, connection_options: dict | None = None):
        self.zk = zk
        self.node_id = node_id
        self.listener_name = listener_name
        self.unclean_leader_election = unclean_leader_election
        self.delete_topic_enable = delete_topic_enable
        self.auto_leader_rebalance = auto_leader_rebalance
        self.rebalance_interval_s = rebalance_interval_s
        self.imbalance_percentage = imbalance_percentage
        # BrokerConnection arguments for the inter-broker listener (TLS context, SASL login)
        self.channel = ControllerChannel(listener_name, socket_timeout_s, connection_options)
        self.active = False
        self.epoch = 0
        self.epoch_zk_version = -1
        self.live: dict[int, tuple[BrokerRegistration, int]] = {}
        self.shutting_down: set[int] = set()
        self.topics: dict[str, TopicAssignment] = {}
        self.states: dict[TopicPartition, tuple[LeaderIsr, int]] = {}
        self.deleting: set[str] = set()
        # topics whose deletion started: the (partition, replica) pairs whose StopReplica(delete) has
        # not been answered without error yet (Kafka's ReplicaDeletionStarted/Ineligible replicas)
        self.deletion_waiting: dict[str, set[tuple[int, int]]] = {}
        self._watched_topics: set[str] = set()
        # replicas on a failed or full log dir, per broker (Kafka's replicasOnOfflineDirs)
        self.offline_replicas: dict[int, set[TopicPartition]] = {}
        self._events: asyncio.Queue[_Event] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task | None = None
        self._rebalance_task: asyncio.Task | None = None

    # -- life cycle ---------------------------------------------------------------------------
    async def start(self) -> None:
        """Start handling events and take part in controller election."""
        self._loop = asyncio.get_running_loop()
        self._events = asyncio.Queue()
        self._task = self._loop.create_task(self._run(), name="controller-events")
        await asyncio.to_thread(self._register_watches)
        self.post("elect")

    def _register_watches(self) -> None:
        self.zk.watch_controller(lambda *_: self.post("controller_change"))
        self.zk.watch_broker_ids(lambda *_: self.post("broker_change"))
        self.zk.watch_topics(lambda *_: self.post("topic_change"))
        self.zk.watch_topic_deletions(lambda *_: self.post("topic_deletion"))
        self.zk.watch_reassignment(lambda *_: self.post("zk_reassignment"))
        self.zk.watch_preferred_replica_election(lambda *_: self.post("zk_preferred_election"))
        self.zk.watch_log_dir_events(lambda *_: self.post("log_dir_event"))

    def post(self, name: str, payload: Any = None) -> None:
        """Queue an event; safe to call from any thread (kazoo's watch callbacks)."""
        loop, events = self._loop, self._events
        if loop is None or events is None or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(events.put_nowait, _Event(name, payload))
        except RuntimeError:  # the loop closed under us: the broker is stopping
            pass

    async def call(self, name: str, payload: Any = None) -> Any:
        """Queue an event from the loop and wait for its result (requests from brokers).

        Raises NotController while the event task is not running (before `start`, after `stop`):
        a request can arrive in that window (another broker elected us from ZooKeeper's view
        before our own start finished), and Kafka answers NOT_CONTROLLER until it is ready."""
        events, task = self._events, self._task
        if events is None or task is None or task.done():
            raise NotController()
        future = asyncio.get_running_loop().create_future()
        events.put_nowait(_Event(name, payload, future))
        return await future

    async def stop(self) -> None:
        events, self._events = self._events, None
        if self._task is not None:
            self._task.cancel()
        if self._rebalance_task is not None:
            self._rebalance_task.cancel()
        self.channel.close()
        self.active = False
        # requests still queued would wait forever for the cancelled task: answer them now
        while events is not None and not events.empty():
            event = events.get_nowait()
            if event.future is not None and not event.future.done():
                event.future.set_exception(NotController())

    def session_expired(self) -> None:
        """Our ZooKeeper session ended: resign now (the events reach the loop later)."""
        self.post("resign_and_elect")

    async def _run(self) -> None:
        events = self._events
        while True:
            event = await events.get()
            try:
                result = await self._process(event)
            except ControllerMovedError:
                log.info("controller %d: the controller epoch moved on; resigning", self.node_id)
                self._resign()
                result = None
                if event.future is not None and not event.future.done():
                    event.future.set_exception(NotController())
                self.post("elect")
            except asyncio.CancelledError:
                # stopping: the request in hand gets NOT_CONTROLLER rather than no answer
                if event.future is not None and not event.future.done():
                    event.future.set_exception(NotController())
                raise
            except Exception as exc:
                log.exception("controller %d failed handling %s", self.node_id, event.name)
                if event.future is not None and not event.future.done():
                    event.future.set_exception(exc)
                if self.active:  # an unexpected failure: give up the role, as Kafka does
                    self._resign()
                    try:
                        await asyncio.to_thread(self.zk.delete_controller_if_mine, self.node_id)
                    except Exception:
                        log.exception("controller %d could not delete /controller", self.node_id)
                continue
            if event.future is not None and not event.future.done():
                event.future.set_result(result)

    async def _zk(self, fn, *args, **kwargs):
        return await asyncio.to_thread(fn, *args, **kwargs)

    async def _process(self, event: _Event) -> Any:
        name = event.name
        if name in ("elect", "controller_change"):
            return await self._elect()
        if name == "resign_and_elect":
            self._resign()
            return await self._elect()
        if name == "alter_partition":
            return await self._alter_partition(*event.payload)
        if name == "allocate_producer_ids":
            return await self._allocate_producer_ids(*event.payload)
        if name == "controlled_shutdown":
            return await self._controlled_shutdown(*event.payload)
        if name == "elect_leaders":
            return await self._elect_leaders(*event.payload)
        if name == "alter_reassignments":
            return await self._alter_reassignments(*event.payload)
        if name == "list_reassignments":
            return await self._list_reassignments(event.payload)
        if not self.active:
            return None
        if name == "broker_change":
            return await self._on_broker_change()
        if name == "topic_change":
            return await self._on_topic_change()
        if name == "partition_modification":
            return await self._on_partition_modification(event.payload)
        if name == "topic_deletion":
            return await self._on_topic_deletion()
        if name == "stop_replica_response":
            return await self._on_stop_replica_response(*event.payload)
        if name == "rebalance":
            return await self._rebalance_leaders()
        if name == "zk_reassignment":
            return await self._on_zk_reassignment()
        if name == "zk_preferred_election":
            return await self._on_zk_preferred_election()
        if name == "log_dir_event":
            return await self._on_log_dir_event()
        if name == "leader_and_isr_response":
            return await self._on_leader_and_isr_outcome(*event.payload)
        log.warning("controller %d: unknown event %s", self.node_id, name)
        return None

    # -- election -----------------------------------------------------------------------------
    async def _elect(self) -> None:
        current = await self._zk(self.zk.get_controller_id)
        if current is not None:
            if current != self.node_id and self.active:
                log.info("controller %d: broker %d is now the controller; resigning", self.node_id, current)
                self._resign()
            return
        won = await self._zk(self.zk.try_elect_controller, self.node_id)
        if won is None:
            if self.active:
                self._resign()
            return
        self.epoch, self.epoch_zk_version = won
        log.info("broker %d is now the controller (epoch %d)", self.node_id, self.epoch)
        self.active = True
        try:
            await self._on_failover()
        except ControllerMovedError:
            raise

    def _resign(self) -> None:
        if not self.active:
            return
        log.info("broker %d resigns as controller (epoch %d)", self.node_id, self.epoch)
        self.active = False
        self.channel.close()
        self.channel = ControllerChannel(self.listener_name, self.channel.socket_timeout_s,
                                         self.channel.connection_options)
        self.live.clear()
        self.shutting_down.clear()
        self.offline_replicas.clear()
        self.topics.clear()
        self.states.clear()
        self.deleting.clear()
        self.deletion_waiting.clear()
        if self._rebalance_task is not None:
            self._rebalance_task.cancel()
            self._rebalance_task = None

    async def _on_failover(self) -> None:
        await self._zk(self.zk.ensure_feature_znode, self.epoch_zk_version)
        self.live = await self._zk(self.zk.get_all_brokers)
        for broker_id, (registration, _) in self.live.items():
            self.channel.add_broker(registration)
        await self._load_topics(await self._zk(self.zk.get_all_topics))
        self.deleting = set(await self._zk(self.zk.get_topics_pending_deletion))
        # 1. the live brokers, before any LeaderAndIsr (a follower needs its leader in its cache)
        batch = self._batch()
        batch.add_update_metadata(self.live)
        self._send(batch)
        # 2. the current state of every partition with a live leader, epoch unchanged
        batch = self._batch()
        for key, (state, zk_version) in self.states.items():
            if key[0] in self.deleting:
                continue
            info = self._info(*key)
            if state.leader in self._live_ids():
                batch.add_leader_and_isr(self._live_replicas(info), info, state, zk_version)
        batch.add_update_metadata(self.live, self._metadata_entries(self.states))
        self._send(batch)
        # 3. replicas on brokers that are gone leave the ISRs (OfflineReplica), leaders are elected
        # where they were the leader, and new partitions get their first leader
        dead = {r for state, _ in self.states.values() for r in state.isr if r not in self.live}
        if dead:
            await self._on_brokers_failed(dead)
        await self._elect_offline_and_new()
        await self._resume_reassignments()
        await self._on_topic_deletion()
        await self._on_zk_preferred_election()
        if self.auto_leader_rebalance:
            self._rebalance_task = asyncio.get_running_loop().create_task(self._rebalance_timer())

    async def _load_topics(self, names: Iterable[str]) -> list[str]:
        loaded = []
        for name in names:
            found = await self._zk(self.zk.get_topic, name)
            if found is None:
                continue
            assignment, version = found
            if assignment.topic_id is None:  # written by an old tool: backfill, as IBP >= 2.8 does
                assignment = replace(assignment, topic_id=new_topic_id())
                await self._zk(self.zk.set_topic_assignment, assignment, self.epoch_zk_version, version)
            self.topics[name] = assignment
            states = await self._zk(self.zk.get_all_partition_states, name)
            for partition, (state, zk_version) in states.items():
                self.states[(name, partition)] = (state, zk_version)
            if name not in self._watched_topics:
                self._watched_topics.add(name)
                await self._zk(self.zk.watch_topic, name,
                               lambda *_args, topic=name: self.post("partition_modification", topic))
            loaded.append(name)
        return loaded

    # -- helpers ------------------------------------------------------------------------------
    def _batch(self) -> RequestBatch:
        return RequestBatch(self.node_id, self.epoch)

    def _send(self, batch: RequestBatch) -> None:
        batch.send(self.channel, self.live, leader_and_isr_callback=self._on_leader_and_isr_response,
                   stop_replica_callback=lambda broker_id, response: self.post("stop_replica_response",
                                                                               (broker_id, response)))

    def _on_leader_and_isr_response(self, broker_id: int, response) -> None:
        if response.error_code:
            log.warning("controller %d: LeaderAndIsr to broker %d failed: %s", self.node_id, broker_id,
                        ErrorCode(response.error_code).name)
        self._leader_and_isr_outcome(broker_id, response)

    def _live_ids(self) -> set[int]:
        """Brokers that may lead or join an ISR: registered and not shutting down."""
        return set(self.live) - self.shutting_down

    def _info(self, topic: str, partition: int) -> PartitionInfo:
        assignment = self.topics[topic]
        return PartitionInfo(topic, partition, assignment.topic_id or uuid.UUID(int=0),
                             list(assignment.partitions.get(partition, [])),
                             list(assignment.adding.get(partition, [])),
                             list(assignment.removing.get(partition, [])))

    def _live_replicas(self, info: PartitionInfo) -> list[int]:
        return [r for r in info.replicas if r in self.live]

    def _metadata_entries(self, keys: Iterable[TopicPartition]) -> list[tuple]:
        entries = []
        for key in keys:
            if key[0] not in self.topics or key not in self.states:
                continue
            state, zk_version = self.states[key]
            info = self._info(*key)
            offline = [r for r in info.replicas if r not in self.live or not self._replica_online(r, key)]
            entries.append((info, state, zk_version, offline))
        return entries

    async def _write_state(self, key: TopicPartition, state: LeaderIsr) -> bool:
        """CAS-write a partition's new state; False (and the context refreshed) on a version clash."""
        old = self.states.get(key)
        try:
            if old is None:
                version = await self._zk(self.zk.create_partition_state, key[0], key[1], state,
                                         self.epoch_zk_version)
            else:
                version = await self._zk(self.zk.update_partition_state, key[0], key[1], state, old[1],
                                         self.epoch_zk_version)
        except (BadVersionError, NodeExistsError):
            fresh = await self._zk(self.zk.get_partition_state, *key)
            if fresh is not None:
                self.states[key] = fresh
                if fresh[0].controller_epoch > self.epoch:
                    raise ControllerMovedError(f"partition {key} was written by controller epoch "
                                               f"{fresh[0].controller_epoch}") from None
            log.warning("controller %d: partition %s-%d changed under us; will retry on the next event",
                        self.node_id, *key)
            return False
        self.states[key] = (state, version)
        return True

    async def _apply(self, changes: dict[TopicPartition, LeaderIsr], *, is_new: bool = False,
                     new_replicas: Iterable[int] = ()) -> list[TopicPartition]:
        """Write each change, then send LeaderAndIsr to the partition's live replicas (`new_replicas`
        marked as new ones) and UpdateMetadata to every broker. Returns the partitions written."""
        written = []
        for key, state in changes.items():
            if await self._write_state(key, state):
                written.append(key)
        if not written:
            return written
        batch = self._batch()
        new_replicas = set(new_replicas)
        for key in written:
            state, version = self.states[key]
            info = self._info(*key)
            targets = self._live_replicas(info)
            batch.add_leader_and_isr([r for r in targets if r not in new_replicas], info, state, version,
                                     is_new=is_new)
            batch.add_leader_and_isr([r for r in targets if r in new_replicas], info, state, version, is_new=True)
        batch.add_update_metadata(self.live, self._metadata_entries(written))
        self._send(batch)
        for key in written:
            state = self.states[key][0]
            log.info("partition %s-%d: leader %d, leader epoch %d, ISR %s", key[0], key[1], state.leader,
                     state.leader_epoch, state.isr)
        return written

    async def _elect_offline_and_new(self, only: Iterable[TopicPartition] | None = None) -> None:
        """Elect leaders for partitions that have none (new, or leader not live)."""
        live = self._live_ids()
        new_states: dict[TopicPartition, LeaderIsr] = {}
        changes: dict[TopicPartition, LeaderIsr] = {}
        keys = list(only) if only is not None else [
            (topic, p) for topic, assignment in self.topics.items() for p in assignment.partitions]
        for key in keys:
            if key[0] in self.deleting or key[0] not in self.topics:
                continue
            info = self._info(*key)
            current = self.states.get(key)
            if current is None:
                state = new_partition_state(info.replicas, live, self.epoch)
                if state is None:
                    log.warning("partition %s-%d: no live replica among %s; it stays offline", key[0], key[1],
                                info.replicas)
                    continue
                new_states[key] = state
                continue
            state = current[0]
            if state.leader in live:
                continue
            elected = offline_election(state, info.replicas, live, self.unclean_leader_election(key[0]),
                                       self.epoch)
            if elected is None:
                if state.leader != NO_LEADER:
                    lost = remove_replicas_from_isr(state, {state.leader}, self.epoch)
                    if lost is not None:
                        changes[key] = lost
                log.warning("partition %s-%d: no live in-sync replica (ISR %s); it stays offline", key[0], key[1],
                            state.isr)
                continue
            if elected.leader_recovery_state == RECOVERING:
                log.warning("partition %s-%d: unclean leader election of broker %d (data may be lost)",
                            key[0], key[1], elected.leader)
            changes[key] = elected
        if new_states:
            await self._apply(new_states, is_new=True)
        if changes:
            await self._apply(changes)

    # -- broker changes -----------------------------------------------------------------------
    async def _on_broker_change(self) -> None:
        current = await self._zk(self.zk.get_all_brokers)
        new = [b for b in current if b not in self.live]
        dead = [b for b in self.live if b not in current]
        bounced = [b for b in current if b in self.live and current[b][1] != self.live[b][1]]
        changed_endpoints = [b for b in current if b in self.live and b not in bounced
                             and current[b][0].endpoints != self.live[b][0].endpoints]
        if not (new or dead or bounced or changed_endpoints):
            return
        log.info("controller %d: brokers new %s, dead %s, bounced %s", self.node_id, sorted(new), sorted(dead),
                 sorted(bounced))
        if dead or bounced:
            gone = set(dead) | set(bounced)
            for broker_id in gone:
                self.live.pop(broker_id, None)
                self.offline_replicas.pop(broker_id, None)  # a restarted broker loads its dirs anew
                self.shutting_down.discard(broker_id)
                self.channel.remove_broker(broker_id)
            await self._on_brokers_failed(gone)
        for broker_id in changed_endpoints:
            self.live[broker_id] = current[broker_id]
            self.channel.add_broker(current[broker_id][0])
        if changed_endpoints and not (new or bounced):
            batch = self._batch()
            batch.add_update_metadata(self.live)
            self._send(batch)
        started = sorted(set(new) | set(bounced))
        if started:
            for broker_id in started:
                self.live[broker_id] = current[broker_id]
                self.channel.add_broker(current[broker_id][0])
            await self._on_brokers_started(started)

    async def _on_brokers_failed(self, gone: set[int]) -> None:
        live = self._live_ids()
        changes: dict[TopicPartition, LeaderIsr] = {}
        for key, (state, _) in list(self.states.items()):
            if key[0] in self.deleting or key[0] not in self.topics:
                continue
            info = self._info(*key)
            if state.leader in gone or state.leader == NO_LEADER:
                elected = offline_election(state, info.replicas, live, self.unclean_leader_election(key[0]),
                                           self.epoch)
                if elected is None:
                    elected = remove_replicas_from_isr(state, gone, self.epoch)
                    log.warning("partition %s-%d: no live in-sync replica left (ISR %s); it is offline",
                                key[0], key[1], state.isr)
                if elected is not None:
                    changes[key] = elected
            elif any(r in gone for r in state.isr):
                shrunk = remove_replicas_from_isr(state, gone, self.epoch)
                if shrunk is not None:
                    changes[key] = shrunk
        await self._apply(changes)
        # partitions whose state did not change still list the dead brokers as offline replicas
        batch = self._batch()
        batch.add_update_metadata(self.live, self._metadata_entries(
            k for k in self.states if k not in changes and any(r in gone for r in self._info(*k).replicas)))
        self._send(batch)

    async def _on_brokers_started(self, started: list[int]) -> None:
        # the new brokers get every partition, before any LeaderAndIsr (a follower needs its
        # leader in its cache); the others only the new broker list
        batch = self._batch()
        batch.add_update_metadata([b for b in self.live if b not in started])
        self._send(batch)
        batch = self._batch()
        batch.add_update_metadata(started, self._metadata_entries(self.states))
        self._send(batch)
        batch = self._batch()
        for key, (state, version) in self.states.items():
            if key[0] in self.deleting or key[0] not in self.topics:
                continue
            info = self._info(*key)
            targets = [b for b in started if b in info.replicas]
            if targets and state.leader != NO_LEADER:
                batch.add_leader_and_isr(targets, info, state, version)
        self._send(batch)
        await self._elect_offline_and_new()
        await self._resume_reassignments(only_on=started)
        await self._on_topic_deletion()
