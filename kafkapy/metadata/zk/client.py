"""KafkaZkClient: every ZooKeeper read and write a kafkapy broker or controller makes, as Kafka 3.7 does it.

A blocking, thread-safe layer over one kazoo session. kafkapy calls it from worker threads
(`asyncio.to_thread`); watch and state callbacks arrive on kazoo's threads and must only hand the
event over (e.g. `loop.call_soon_threadsafe`), never block.

Semantics that callers rely on:
- A call made while the connection is down waits until kazoo reconnects (as Kafka's
  ZooKeeperClient does); `close()` releases such waiters with ZkConnectionError. A request that
  was in flight when the connection dropped is sent again, so it may have been applied already:
  every method below copes with meeting its own earlier write (NODEEXISTS, BADVERSION re-checks).
- Controller writes are *fenced*: they take the znode version of /controller_epoch that
  `try_elect_controller` returned and run as one multi whose first op checks it. A failed check
  raises ControllerMovedError and nothing is written.
- Watches are armed at once and also fire once right away, so a caller that reacts to the
  callback cannot miss a change that happened before the watch existed. They survive session
  loss (kazoo re-arms them). Each returns a WatchHandle to stop it.
- zookeeper.set.acl is not supported: znodes get the open ACL.

The session and its primitives (retries, multis, watches) are ZkSession (session.py); the config
and ACL znodes ZkConfigsAndAcls (entity_configs.py); KafkaZkClient adds brokers, the controller,
partition state, topics, features, producer id blocks, reassignment and log dir events.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping

from kazoo import exceptions as kz

from .entity_configs import ZkConfigsAndAcls
from .errors import (BadVersionError, BrokerIdInUseError, ControllerMovedError, NodeExistsError, NoNodeError,
                     TopicExistsError, ZkConnectionError, ZkError)
from .paths import LOG_DIR_EVENT_PATH, LOG_DIR_EVENT_PREFIX, decode_log_dir_event, encode_log_dir_event
from .paths import (BROKER_IDS_PATH, CONTROLLER_EPOCH_PATH, CONTROLLER_PATH, CLUSTER_ID_PATH,
                    DELETE_TOPICS_PATH, FEATURE_PATH, PERSISTENT_PATHS, PREFERRED_REPLICA_ELECTION_PATH,
                    PRODUCER_ID_BLOCK_PATH, PRODUCER_ID_BLOCK_SIZE, REASSIGN_PARTITIONS_PATH, TOPICS_PATH,
                    BrokerRegistration, FinalizedFeatures, LeaderIsr, ProducerIdBlock, TopicAssignment,
                    ZnodeDecodeError, broker_path, config_entity_path, decode_broker, decode_cluster_id,
                    decode_controller, decode_controller_epoch, decode_feature, decode_partition_state,
                    decode_producer_id_block, decode_preferred_replica_election, decode_reassignment,
                    decode_topic, delete_topic_path, encode_broker, encode_cluster_id, encode_config,
                    encode_controller, encode_controller_epoch, encode_feature, encode_partition_state,
                    encode_producer_id_block, encode_reassignment, encode_topic, partition_state_path,
                    topic_partition_path, topic_partitions_path, topic_path)
from .session import UNKNOWN_VERSION, WatchHandle, _Op, _OpFailed, _translate

__all__ = ["BadVersionError", "BrokerIdInUseError", "ControllerMovedError", "KafkaZkClient", "NoNodeError",
           "NodeExistsError", "TopicExistsError", "UNKNOWN_VERSION", "WatchHandle", "ZkConnectionError", "ZkError"]

log = logging.getLogger(__name__)


class KafkaZkClient(ZkConfigsAndAcls):
    """One broker's ZooKeeper session and the Kafka 3.7 operations on it (see the module docstring)."""

    # -- startup ---------------------------------------------------------------------------------------

    def ensure_persistent_paths(self) -> None:
        for path in PERSISTENT_PATHS:
            self._ensure_path(path)

    def get_or_create_cluster_id(self, proposed: str) -> str:
        """The cluster id in /cluster/id, which the first broker to get here sets to `proposed`."""
        try:
            self._create(CLUSTER_ID_PATH, encode_cluster_id(proposed))
        except kz.NodeExistsError:
            pass
        found = self._get(CLUSTER_ID_PATH)
        if found is None:
            raise NoNodeError(f"{CLUSTER_ID_PATH} vanished right after it was created")
        return decode_cluster_id(found[0])

    # -- brokers ---------------------------------------------------------------------------------------

    def register_broker(self, registration: BrokerRegistration) -> int:
        """Creates the ephemeral /brokers/ids/<id> and returns its czxid, the broker epoch."""
        path = broker_path(registration.broker_id)
        data = encode_broker(registration)
        for _ in range(10):
            try:
                # Create-then-set in one multi, as Kafka does: the set's stat carries the new
                # node's czxid, so no second read is needed to learn the epoch.
                results = self._commit([_Op("create", path, ephemeral=True), _Op("set", path, data, version=0)])
                epoch = results[1].czxid
                log.info("registered broker %d in ZooKeeper at %s with broker epoch %d", registration.broker_id,
                         path, epoch)
                return epoch
            except _OpFailed as failed:
                if isinstance(failed.error, kz.NoNodeError):
                    self._ensure_path(BROKER_IDS_PATH)
                    continue
                if not isinstance(failed.error, kz.NodeExistsError):
                    raise _translate(failed.error, path) from None
            found = self._get(path)
            if found is None:
                continue  # the previous owner's session ended meanwhile
            _, stat = found
            if stat.ephemeralOwner == self.session_id:
                # Ours: an earlier attempt went through before the connection dropped.
                self._retry(lambda client: client.set(path, data))
                return stat.czxid
            raise BrokerIdInUseError(f"broker.id {registration.broker_id} is already registered in ZooKeeper "
                                     f"by another live broker")
        raise ZkError(f"could not register {path}: it kept appearing and disappearing")

    def get_broker(self, broker_id: int) -> tuple[BrokerRegistration, int] | None:
        """(registration, broker epoch) of a live broker, None if not registered."""
        found = self._get(broker_path(broker_id))
        if found is None:
            return None
        data, stat = found
        return decode_broker(broker_id, data), stat.czxid

    def get_all_brokers(self) -> dict[int, tuple[BrokerRegistration, int]]:
        ids = sorted(int(child) for child in self._children(BROKER_IDS_PATH) if child.lstrip("-").isdigit())
        found = self._get_many([broker_path(broker_id) for broker_id in ids])
        brokers = {}
        for broker_id in ids:
            got = found.get(broker_path(broker_id))
            if got is None:
                continue  # went away between the listing and the read
            try:
                brokers[broker_id] = (decode_broker(broker_id, got[0]), got[1].czxid)
            except ZnodeDecodeError as exc:
                log.error("ignoring broker %d: unreadable registration: %s", broker_id, exc)
        return brokers

    def watch_broker_ids(self, callback: Callable[[], None]) -> WatchHandle:
        return self.watch_children(BROKER_IDS_PATH, lambda _children: callback())

    # -- controller election ---------------------------------------------------------------------------

    def get_controller_id(self) -> int | None:
        found = self._get(CONTROLLER_PATH)
        return decode_controller(found[0]) if found is not None else None

    def watch_controller(self, callback: Callable[[], None]) -> WatchHandle:
        return self.watch_data(CONTROLLER_PATH, lambda _data, _stat: callback())

    def get_controller_epoch(self) -> tuple[int, int] | None:
        """(epoch, znode version of /controller_epoch), None before the first election."""
        found = self._get(CONTROLLER_EPOCH_PATH)
        if found is None:
            return None
        data, stat = found
        return decode_controller_epoch(data), stat.version

    def try_elect_controller(self, broker_id: int) -> tuple[int, int] | None:
        """Tries to become controller; (new epoch, its znode version) on success, None if another won."""
        current = self.get_controller_epoch()
        if current is None:
            try:
                self._create(CONTROLLER_EPOCH_PATH, encode_controller_epoch(0))
            except kz.NodeExistsError:
                pass
            current = self.get_controller_epoch()
            if current is None:
                raise NoNodeError(f"{CONTROLLER_EPOCH_PATH} vanished right after it was created")
        epoch, version = current
        new_epoch = epoch + 1
        try:
            # Claiming /controller and bumping the epoch in one multi makes the epoch's znode
            # version the fencing token: it moves exactly when someone wins.
            results = self._commit([
                _Op("create", CONTROLLER_PATH, encode_controller(broker_id), ephemeral=True),
                _Op("set", CONTROLLER_EPOCH_PATH, encode_controller_epoch(new_epoch), version=version)])
        except _OpFailed as failed:
            if not isinstance(failed.error, (kz.NodeExistsError, kz.BadVersionError)):
                raise _translate(failed.error, failed.op.path) from None
            # Lost, unless it is our own earlier attempt that went through before a reconnect.
            return self._own_election(broker_id, new_epoch)
        new_version = results[1].version
        log.info("broker %d won the controller election: epoch %d (znode version %d)", broker_id, new_epoch,
                 new_version)
        return new_epoch, new_version

    def delete_controller_if_mine(self, broker_id: int) -> bool:
        """Deletes /controller if this session created it for `broker_id`; True if it did.

        For giving up the role after an unexpected failure, when the epoch token may already be
        stale: ownership (and the znode version, so a newer controller's node is never touched)
        is the guard instead.
        """
        found = self._get(CONTROLLER_PATH)
        if found is None:
            return False
        data, stat = found
        if decode_controller(data) != broker_id or stat.ephemeralOwner != self.session_id:
            return False
        try:
            self._retry(lambda client: client.delete(CONTROLLER_PATH, version=stat.version))
        except (kz.NoNodeError, kz.BadVersionError):
            return False
        log.info("broker %d deleted /controller to give up the controller role", broker_id)
        return True

    def _own_election(self, broker_id: int, new_epoch: int) -> tuple[int, int] | None:
        controller = self._get(CONTROLLER_PATH)
        current = self.get_controller_epoch()
        if controller is None or current is None:
            return None
        data, stat = controller
        if decode_controller(data) == broker_id and stat.ephemeralOwner == self.session_id and current[0] == new_epoch:
            return current
        return None

    # -- fenced controller writes ----------------------------------------------------------------------

    def create_partition_state(self, topic: str, partition: int, state: LeaderIsr, epoch_zk_version: int) -> int:
        """Creates the state znode of a new partition (and its parents); returns its version, 0."""
        state_path = partition_state_path(topic, partition)
        data = encode_partition_state(state)
        for _ in range(5):
            parents = [path for path in (topic_partitions_path(topic), topic_partition_path(topic, partition))
                       if self._exists(path) is None]
            try:
                self._fenced(epoch_zk_version, [*(_Op("create", path) for path in parents),
                                                _Op("create", state_path, data)])
                return 0
            except _OpFailed as failed:
                if failed.index < len(parents) and isinstance(failed.error, kz.NodeExistsError):
                    continue  # a parent appeared concurrently; look again
                raise _translate(failed.error, failed.op.path) from None
        raise ZkError(f"could not create {state_path}: its parents kept changing")

    def update_partition_state(self, topic: str, partition: int, state: LeaderIsr, expected_version: int,
                               epoch_zk_version: int) -> int:
        """Compare-and-set of a partition state; returns the new znode version (the partition epoch)."""
        path = partition_state_path(topic, partition)
        try:
            results = self._fenced(epoch_zk_version,
                                   [_Op("set", path, encode_partition_state(state), version=expected_version)])
        except _OpFailed as failed:
            raise _translate(failed.error, path) from None
        return results[0].version

    def set_topic_assignment(self, assignment: TopicAssignment, epoch_zk_version: int,
                             expected_version: int = -1) -> int:
        """Rewrites /brokers/topics/<t> as controller; returns the new znode version."""
        path = topic_path(assignment.name)
        try:
            results = self._fenced(epoch_zk_version,
                                   [_Op("set", path, encode_topic(assignment), version=expected_version)])
        except _OpFailed as failed:
            raise _translate(failed.error, path) from None
        return results[0].version

    def set_topic_assignment_unfenced(self, assignment: TopicAssignment, expected_version: int = -1) -> int:
        """Rewrites /brokers/topics/<t> outside the controller (Kafka's AdminZkClient, e.g. CreatePartitions)."""
        path = topic_path(assignment.name)
        try:
            stat = self._retry(lambda client: client.set(path, encode_topic(assignment), version=expected_version))
        except (kz.BadVersionError, kz.NoNodeError) as exc:
            raise _translate(exc, path) from None
        return stat.version

    def delete_topic_znodes(self, topic: str, epoch_zk_version: int) -> None:
        """Removes a deleted topic's znodes: its subtree, its config and its deletion marker, atomically."""
        for _ in range(10):
            ops = [_Op("delete", path) for path in self._subtree(topic_path(topic))]
            for path in (config_entity_path("topics", topic), delete_topic_path(topic)):
                if self._exists(path) is not None:
                    ops.append(_Op("delete", path))
            if not ops:
                return
            try:
                self._fenced(epoch_zk_version, ops)
                log.info("deleted the znodes of topic %s", topic)
                return
            except _OpFailed as failed:
                if isinstance(failed.error, (kz.NoNodeError, kz.NotEmptyError)):
                    continue  # the tree changed since we listed it
                raise _translate(failed.error, failed.op.path) from None
        raise ZkError(f"could not delete the znodes of topic {topic}: they kept changing")

    def _subtree(self, root: str) -> list[str]:
        """`root` and everything under it, children before parents (the order deletes need)."""
        order: list[str] = []

        def visit(path: str) -> None:
            for child in self._children(path):
                visit(f"{path}/{child}")
            order.append(path)

        if self._exists(root) is None:
            return []
        visit(root)
        return order

    def delete_admin_path(self, path: str, epoch_zk_version: int) -> None:
        """Deletes one processed admin or notification znode as controller; a missing one is fine."""
        try:
            self._fenced(epoch_zk_version, [_Op("delete", path)])
        except _OpFailed as failed:
            if not isinstance(failed.error, kz.NoNodeError):
                raise _translate(failed.error, path) from None

    def ensure_feature_znode(self, epoch_zk_version: int) -> int:
        """/feature as a 3.7 controller leaves it: status 1 (enabled), finalized features empty."""
        wanted = encode_feature(FinalizedFeatures())
        for _ in range(10):
            found = self._get(FEATURE_PATH)
            try:
                if found is None:
                    self._fenced(epoch_zk_version, [_Op("create", FEATURE_PATH, wanted)])
                    return 0
                data, stat = found
                if decode_feature(data).status == 1:
                    return stat.version  # enabled already; finalized features are left as they are
                results = self._fenced(epoch_zk_version, [_Op("set", FEATURE_PATH, wanted, version=stat.version)])
                return results[0].version
            except _OpFailed as failed:
                if not isinstance(failed.error, (kz.NodeExistsError, kz.BadVersionError, kz.NoNodeError)):
                    raise _translate(failed.error, FEATURE_PATH) from None
        raise ZkError(f"could not settle {FEATURE_PATH}: it kept changing")

    def get_feature(self) -> tuple[FinalizedFeatures | None, int]:
        """/feature and its znode version (None, -1 when absent)."""
        found = self._get(FEATURE_PATH)
        if found is None:
            return None, -1
        return decode_feature(found[0]), found[1].version

    def update_feature(self, changes: Mapping[str, int]) -> None:
        """UpdateFeatures: set (level > 0) or remove finalized levels in /feature, compare-and-set."""
        for _ in range(10):
            state, version = self.get_feature()
            state = state if state is not None else FinalizedFeatures()
            features = dict(state.features)
            features.update(changes)  # 0 kept: a feature turned off stays off over a new default
            data = encode_feature(FinalizedFeatures(1, features, 2))
            try:
                if version < 0:
                    self._create(FEATURE_PATH, data)
                else:
                    self._retry(lambda client: client.set(FEATURE_PATH, data, version=version))
                return
            except (kz.NodeExistsError, kz.BadVersionError, kz.NoNodeError):
                continue
        raise ZkError(f"could not update {FEATURE_PATH}: it kept changing")

    def allocate_producer_id_block(self, broker_id: int, epoch_zk_version: int) -> tuple[int, int]:
        """Claims the next 1000 producer ids for `broker_id`: (first id, count)."""
        while True:
            found = self._get(PRODUCER_ID_BLOCK_PATH)
            first = 0
            if found is not None and found[0]:
                first = decode_producer_id_block(found[0]).last_id + 1
            if first > 2**63 - 1 - PRODUCER_ID_BLOCK_SIZE:
                raise ZkError("all producer ids have been handed out")
            data = encode_producer_id_block(ProducerIdBlock(broker_id, first, first + PRODUCER_ID_BLOCK_SIZE - 1))
            op = (_Op("create", PRODUCER_ID_BLOCK_PATH, data) if found is None
                  else _Op("set", PRODUCER_ID_BLOCK_PATH, data, version=found[1].version))
            try:
                self._fenced(epoch_zk_version, [op])
            except _OpFailed as failed:
                if isinstance(failed.error, (kz.BadVersionError, kz.NodeExistsError, kz.NoNodeError)):
                    continue  # someone else moved the block meanwhile (a pre-3.0 broker); read again
                raise _translate(failed.error, PRODUCER_ID_BLOCK_PATH) from None
            log.info("allocated producer ids %d-%d to broker %d", first, first + PRODUCER_ID_BLOCK_SIZE - 1,
                     broker_id)
            return first, PRODUCER_ID_BLOCK_SIZE

    # -- topics ----------------------------------------------------------------------------------------

    def get_all_topics(self) -> list[str]:
        return sorted(self._children(TOPICS_PATH))

    def watch_topics(self, callback: Callable[[], None]) -> WatchHandle:
        return self.watch_children(TOPICS_PATH, lambda _children: callback())

    def get_topic(self, name: str) -> tuple[TopicAssignment, int] | None:
        """(assignment, znode version) of a topic, None if it does not exist."""
        found = self._get(topic_path(name))
        if found is None:
            return None
        return decode_topic(name, found[0]), found[1].version

    def watch_topic(self, name: str, callback: Callable[[TopicAssignment | None], None]) -> WatchHandle:
        """callback(assignment) on every change of /brokers/topics/<t>, callback(None) once it is gone."""
        return self.watch_data(topic_path(name),
                               lambda data, _stat: callback(decode_topic(name, data) if data is not None else None))

    def create_topic(self, assignment: TopicAssignment, configs: Mapping[str, str]) -> None:
        """Kafka's AdminZkClient order: the config znode first, then the topic znode the controller watches."""
        # No config_change notification: brokers read a new topic's config when it appears.
        self._set_or_create(config_entity_path("topics", assignment.name), encode_config(configs))
        try:
            self._create(topic_path(assignment.name), encode_topic(assignment))
        except kz.NodeExistsError:
            raise TopicExistsError(f"Topic '{assignment.name}' already exists.") from None

    def get_partition_state(self, topic: str, partition: int) -> tuple[LeaderIsr, int] | None:
        """(state, znode version = partition epoch), None before the controller created it."""
        path = partition_state_path(topic, partition)
        found = self._get(path)
        if found is None:
            return None
        return decode_partition_state(found[0], path), found[1].version

    def get_all_partition_states(self, topic: str) -> dict[int, tuple[LeaderIsr, int]]:
        partitions = sorted(int(child) for child in self._children(topic_partitions_path(topic)) if child.isdigit())
        found = self._get_many([partition_state_path(topic, p) for p in partitions])
        states = {}
        for p in partitions:
            path = partition_state_path(topic, p)
            if path in found:
                data, stat = found[path]
                states[p] = (decode_partition_state(data, path), stat.version)
        return states

    def mark_topic_for_deletion(self, name: str) -> bool:
        """Creates /admin/delete_topics/<t>; False if it was already marked."""
        try:
            self._create(delete_topic_path(name), b"")
            return True
        except kz.NodeExistsError:
            return False

    def get_topics_pending_deletion(self) -> list[str]:
        return sorted(self._children(DELETE_TOPICS_PATH))

    def watch_topic_deletions(self, callback: Callable[[], None]) -> WatchHandle:
        return self.watch_children(DELETE_TOPICS_PATH, lambda _children: callback())

    # -- legacy reassignment znode ---------------------------------------------------------------------

    def get_reassignment(self) -> dict[tuple[str, int], list[int]] | None:
        """The targets in /admin/reassign_partitions (kafka-reassign-partitions before 2.4), None if absent."""
        found = self._get(REASSIGN_PARTITIONS_PATH)
        if found is None:
            return None
        try:
            return decode_reassignment(found[0])
        except ZnodeDecodeError as exc:  # as Kafka: ignored (and left in place), with a warning
            log.warning("Ignoring partition reassignment due to invalid json: %s", exc)
            return {}

    def watch_reassignment(self, callback: Callable[[], None]) -> WatchHandle:
        """callback() when /admin/reassign_partitions is created, changed or deleted (and once now)."""
        return self.watch_data(REASSIGN_PARTITIONS_PATH, lambda _data, _stat: callback())

    def set_or_delete_reassignment(self, targets: Mapping[tuple[str, int], Iterable[int]],
                                   epoch_zk_version: int) -> None:
        """Rewrites /admin/reassign_partitions as controller with what is left of it, or deletes it
        when nothing is."""
        path = REASSIGN_PARTITIONS_PATH
        if not targets:
            self.delete_admin_path(path, epoch_zk_version)
            return
        op = "set" if self._exists(path) is not None else "create"
        try:
            self._fenced(epoch_zk_version, [_Op(op, path, encode_reassignment(targets))])
        except _OpFailed as failed:
            raise _translate(failed.error, path) from None

    def get_preferred_replica_election(self) -> set[tuple[str, int]] | None:
        """The partitions in /admin/preferred_replica_election (kafka-preferred-replica-election
        before 2.4), None if absent; an unreadable znode counts as empty."""
        found = self._get(PREFERRED_REPLICA_ELECTION_PATH)
        if found is None:
            return None
        try:
            return decode_preferred_replica_election(found[0])
        except ZnodeDecodeError as exc:
            log.warning("Ignoring preferred replica election due to invalid json: %s", exc)
            return set()

    def watch_preferred_replica_election(self, callback: Callable[[], None]) -> WatchHandle:
        return self.watch_data(PREFERRED_REPLICA_ELECTION_PATH, lambda _data, _stat: callback())

    # -- log dir events (Kafka's LogDirEventNotification) ------------------------------------------------

    def create_log_dir_event(self, broker_id: int) -> None:
        """Tell the controller that a log dir of `broker_id` changed (Kafka writes one on a failure;
        kafkapy also when a full dir is back): /log_dir_event_notification/log_dir_event_<seq>."""
        self._ensure_path(LOG_DIR_EVENT_PATH)
        self._create(f"{LOG_DIR_EVENT_PATH}/{LOG_DIR_EVENT_PREFIX}", encode_log_dir_event(broker_id), sequence=True)

    def watch_log_dir_events(self, callback: Callable[[], None]) -> WatchHandle:
        return self.watch_children(LOG_DIR_EVENT_PATH, lambda _children: callback())

    def take_log_dir_events(self) -> set[int]:
        """The brokers named by the pending log dir events, which are deleted (the controller's
        read-and-delete, as Kafka's LogDirEventNotification handling)."""
        names = self._children(LOG_DIR_EVENT_PATH)
        paths = [f"{LOG_DIR_EVENT_PATH}/{name}" for name in names]
        found = self._get_many(paths)
        brokers = set()
        for path in paths:
            if path in found:
                try:
                    brokers.add(decode_log_dir_event(found[path][0]))
                except ZnodeDecodeError as exc:
                    log.warning("ignoring unreadable log dir event %s: %s", path, exc)
            try:
                self._retry(lambda client, path=path: client.delete(path))
            except kz.NoNodeError:
                pass
        return brokers
