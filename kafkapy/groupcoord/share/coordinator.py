"""Share groups (KIP-932): membership, assignment, share sessions, group configs and the
share-partitions of one broker.

One object per broker (Broker.share_groups, built on the first share request). Two roles live
in it, as in Kafka, and both take the same path on a single node and in a cluster:

- group coordinator of the share groups whose __consumer_offsets partition is led here
  (ShareGroupHeartbeat, ShareGroupDescribe): members, epochs and the server-side assignment,
  where every member subscribed to a topic is assigned all its partitions (share groups let
  members share partitions; the share-partition hands each record to one of them);
- share-partition leader of the partitions led here (ShareFetch, ShareAcknowledge): the
  share sessions of members and the in-flight state of each (group, topic, partition).

Members and sessions are kept in memory; share-partition state is written to __share_group_state
by the handlers (state_store.py, docs/share-groups.md "Durability"). Time comes from the caller
(`now`, seconds, monotonic).
"""
from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field

from ...protocol.errors import ErrorCode
from .assignor import assign
from .partition import SharePartition

log = logging.getLogger(__name__)

# how long a group's configs read from the metadata store are used before they are read again
GROUP_CONFIG_TTL_S = 2.0

# group configs Kafka accepts on GROUP config resources for share groups, with their defaults
SHARE_GROUP_CONFIGS = {
    "share.auto.offset.reset": "latest",
    "share.isolation.level": "read_uncommitted",
    "share.record.lock.duration.ms": None,     # None: the broker's group.share.record.lock.duration.ms
    "share.delivery.count.limit": None,        # None: the broker's group.share.delivery.count.limit
    "share.session.timeout.ms": None,
    "share.heartbeat.interval.ms": None,
}
_CONFIG_CHOICES = {
    "share.auto.offset.reset": ("earliest", "latest"),
    "share.isolation.level": ("read_uncommitted", "read_committed"),
}


@dataclass
class ShareGroupConfig:
    """The broker's group.share.* settings."""

    enabled: bool = True
    record_lock_duration_ms: int = 30000
    delivery_count_limit: int = 5
    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 5000
    max_size: int = 200
    partition_max_record_locks: int = 2000

    @classmethod
    def from_getter(cls, get) -> "ShareGroupConfig":
        return cls(enabled=get("group.share.enable"),
                   record_lock_duration_ms=get("group.share.record.lock.duration.ms"),
                   delivery_count_limit=get("group.share.delivery.count.limit"),
                   session_timeout_ms=get("group.share.session.timeout.ms"),
                   heartbeat_interval_ms=get("group.share.heartbeat.interval.ms"),
                   max_size=get("group.share.max.size"),
                   partition_max_record_locks=get("group.share.partition.max.record.locks"))


@dataclass
class ShareMember:
    member_id: str
    member_epoch: int
    client_id: str
    client_host: str
    rack_id: str | None
    subscribed: list[str]
    deadline: float
    assignment: dict[uuid.UUID, list[int]] = field(default_factory=dict)
    # the epoch before the last move: a heartbeat with it is accepted (the answer that moved the
    # member may have been lost; Kafka's throwIfShareGroupMemberEpochIsInvalid)
    previous_epoch: int = 0
    # the assignment this member was last sent: Kafka sends it again only when it changes
    reported: dict[uuid.UUID, list[int]] | None = None


@dataclass
class ShareGroup:
    group_id: str
    # Kafka 4.4's ModernGroup starts a group at epoch 1, so the first member's join answers 2
    group_epoch: int = 1
    members: dict[str, ShareMember] = field(default_factory=dict)
    # the share-partitions whose state the group has initialized (Kafka's
    # ShareGroupStatePartitionMetadata): every partition ever assigned to a member and those
    # AlterShareGroupOffsets set; DescribeShareGroupOffsets of all topics lists these, members or not
    initialized: dict[uuid.UUID, set[int]] = field(default_factory=dict)
    # topic id -> partition count of the subscribed topics when the assignment was last computed
    layout: dict[uuid.UUID, int] = field(default_factory=dict)

    @property
    def state(self) -> str:
        return "Stable" if self.members else "Empty"


@dataclass
class ListedShareGroup:
    group_id: str
    state: str
    protocol_type: str = "share"
    group_type: str = "share"


@dataclass
class HeartbeatResult:
    error: int = ErrorCode.NONE
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: dict[uuid.UUID, list[int]] | None = None


@dataclass
class ShareSession:
    """A member's share session on this share-partition leader (Kafka's ShareSession)."""

    group_id: str
    member_id: str
    epoch: int
    partitions: set = field(default_factory=set)   # (topic name, partition, topic id)
    last_used: float = 0.0


class ShareGroupCoordinator:
    """See the module docstring."""

    def __init__(self, config: ShareGroupConfig, topics, load_configs=None, store_configs=None, peers=None) -> None:
        self.config = config
        # topics: name -> TopicMetadata or None (the metadata store's get_topic)
        self._topics = topics
        self.groups: dict[str, ShareGroup] = {}
        # group configs live in the metadata store (load_configs / store_configs: its
        # get_group_configs / set_group_configs), so that every broker of a cluster and a restarted
        # one see them; read again after GROUP_CONFIG_TTL_S
        self._load_configs = load_configs
        self._store_configs = store_configs
        self.group_configs: dict[str, dict[str, str]] = {}
        self._configs_read_at: dict[str, float] = {}
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        self.partitions: dict[tuple[str, str, int], SharePartition] = {}
        # the topic id each share-partition above belongs to: the map is keyed by topic name (as
        # the handlers look it up), but Kafka keys share state by topic id, so a share-partition
        # of a topic deleted and created again under its name is a stale one (drop_if_recreated)
        self.partition_topic_ids: dict[tuple[str, str, int], uuid.UUID] = {}
        self.released: list[ShareSession] = []
        # __share_group_state (state_store.ShareStateStore), set by the broker once the topic exists
        self.state_store = None
        # the other brokers' share coordinators (a net.peers.PeerConnections; None: a single node's)
        self.peers = peers
        self.state_store_retry_at = 0.0
        # the share state writes of concurrent requests, stored together (broker/handlers/share_groups.py)
        self.state_writes = None

    # -- group configs (IncrementalAlterConfigs / DescribeConfigs on GROUP resources) ----------
    def _overrides(self, group_id: str) -> dict[str, str]:
        if self._load_configs is not None:
            now = time.monotonic()
            if now - self._configs_read_at.get(group_id, -GROUP_CONFIG_TTL_S) >= GROUP_CONFIG_TTL_S:
                try:
                    self.group_configs[group_id] = dict(self._load_configs(group_id))
                except Exception as exc:  # e.g. ZooKeeper unreachable: keep what was read last
                    log.warning("cannot read the configs of group %s: %s", group_id, exc)
                self._configs_read_at[group_id] = now
        return self.group_configs.get(group_id, {})

    def group_config(self, group_id: str, name: str):
        value = self._overrides(group_id).get(name)
        if value is not None:
            return value
        broker_default = {
            "share.record.lock.duration.ms": self.config.record_lock_duration_ms,
            "share.delivery.count.limit": self.config.delivery_count_limit,
            "share.session.timeout.ms": self.config.session_timeout_ms,
            "share.heartbeat.interval.ms": self.config.heartbeat_interval_ms,
        }
        if name in broker_default:
            return broker_default[name]
        return SHARE_GROUP_CONFIGS[name]

    def lock_duration_s(self, group_id: str) -> float:
        return int(self.group_config(group_id, "share.record.lock.duration.ms")) / 1000.0

    def describe_group_configs(self, group_id: str) -> list[tuple[str, str, bool]]:
        """(name, value, is_default) of every share group config."""
        overrides = self._overrides(group_id)
        return [(name, str(self.group_config(group_id, name)), name not in overrides)
                for name in SHARE_GROUP_CONFIGS]

    def alter_group_configs(self, group_id: str, ops, validate_only: bool) -> tuple[int, str | None]:
        """IncrementalAlterConfigs ops (name, operation 0 SET / 1 DELETE, value) on a group."""
        updated = dict(self._overrides(group_id))
        for name, operation, value in ops:
            if name not in SHARE_GROUP_CONFIGS:
                return ErrorCode.INVALID_CONFIG, f"Unknown group config name: {name}"
            if operation == 1:
                updated.pop(name, None)
                continue
            if operation != 0 or value is None:
                return ErrorCode.INVALID_CONFIG, f"Unsupported operation on group config {name}"
            choices = _CONFIG_CHOICES.get(name)
            if choices is not None:
                if value.lower() not in choices:
                    return ErrorCode.INVALID_CONFIG, f"Invalid value {value} for configuration {name}"
                value = value.lower()
            else:
                try:
                    number = int(value)
                except ValueError:
                    return ErrorCode.INVALID_CONFIG, f"Invalid value {value} for configuration {name}"
                low = 2 if name == "share.delivery.count.limit" else 1
                if number < low:
                    return ErrorCode.INVALID_CONFIG, f"Invalid value {value} for configuration {name}"
            updated[name] = value
        if not validate_only:
            if self._store_configs is not None:
                try:
                    self._store_configs(group_id, updated)
                except Exception as exc:
                    return ErrorCode.UNKNOWN_SERVER_ERROR, f"cannot store the configs of group {group_id}: {exc}"
            self.group_configs[group_id] = updated
            self._configs_read_at[group_id] = time.monotonic()
        return ErrorCode.NONE, None

    # -- membership (group coordinator role) ----------------------------------------------
    def heartbeat(self, group_id: str, member_id: str, member_epoch: int, rack_id: str | None,
                  subscribed: list[str] | None, client_id: str, client_host: str, now: float) -> HeartbeatResult:
        """ShareGroupHeartbeat: join (epoch 0), stay (current epoch), leave (epoch -1)."""
        if not group_id:
            return HeartbeatResult(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
        if not member_id:
            # Kafka 4.4 answers this one without a message
            return HeartbeatResult(ErrorCode.INVALID_REQUEST)
        self.expire_members(now)
        group = self.groups.get(group_id)
        if group is None and member_epoch != 0:
            # Kafka 4.4 answers GROUP_ID_NOT_FOUND "Share group <id> not found.", but it keeps share
            # groups in __consumer_offsets; kafkapy does not store members, so a group unknown here
            # may be one a restarted or moved coordinator lost: UNKNOWN_MEMBER_ID makes its members
            # join again (librdkafka stops a member on GROUP_ID_NOT_FOUND)
            return HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID,
                                   f"Member {member_id} is not a member of group {group_id}.")
        if member_epoch == -1:
            if group.members.pop(member_id, None) is None:
                return HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID,
                                       f"Member {member_id} is not a member of group {group_id}.")
            group.group_epoch += 1
            self._assign(group)
            # its share sessions stay: Kafka's share-partition leader ends one when the member
            # closes it (epoch -1, after applying the acknowledgements it carries), when its
            # connection closes, or not at all (the acquisition locks expire); a leave heartbeat that
            # arrives before the closing ShareAcknowledge must not lose those acknowledgements
            return HeartbeatResult(member_id=member_id, member_epoch=-1)
        interval = int(self.group_config(group_id, "share.heartbeat.interval.ms"))
        session_s = int(self.group_config(group_id, "share.session.timeout.ms")) / 1000.0
        if member_epoch == 0:
            if subscribed is None or not subscribed:
                return HeartbeatResult(ErrorCode.INVALID_REQUEST,
                                       "SubscribedTopicNames must be set in first request.")
            if group is None:
                group = self.groups[group_id] = ShareGroup(group_id)
            member = group.members.get(member_id)
            if member is None:
                if len(group.members) >= self.config.max_size:
                    return HeartbeatResult(ErrorCode.GROUP_MAX_SIZE_REACHED,
                                           f"The share group has reached its maximum capacity of "
                                           f"{self.config.max_size} members.")
                member = group.members[member_id] = ShareMember(
                    member_id, 0, client_id, client_host, rack_id, sorted(set(subscribed)), now + session_s)
                group.group_epoch += 1
                self._assign(group)
        else:
            member = group.members.get(member_id)
            if member is None:
                return HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID,
                                       f"Member {member_id} is not a member of group {group_id}.")
            if member_epoch > member.member_epoch:
                return HeartbeatResult(ErrorCode.FENCED_MEMBER_EPOCH,
                                       f"The share group member has a greater member epoch ({member_epoch}) than "
                                       f"the one known by the group coordinator ({member.member_epoch}). The member "
                                       f"must abandon all its partitions and rejoin.")
            if member_epoch < member.member_epoch and member_epoch != member.previous_epoch:
                return HeartbeatResult(ErrorCode.FENCED_MEMBER_EPOCH,
                                       f"The share group member has a smaller member epoch ({member_epoch}) than "
                                       f"the one known by the group coordinator ({member.member_epoch}), and it "
                                       f"does not match the previous member epoch ({member.previous_epoch}). The "
                                       f"member must abandon all its partitions and rejoin.")
        # a rejoin (epoch 0 of a known member) with the same topics moves nothing, as in Kafka
        if subscribed is not None and sorted(set(subscribed)) != member.subscribed:
            member.subscribed = sorted(set(subscribed))
            group.group_epoch += 1
            self._assign(group)
        # a subscribed topic may have been created, deleted or given partitions since the last assignment
        if self._layout(group)[1] != group.layout:
            group.group_epoch += 1
            self._assign(group)
        member.deadline = now + session_s
        if rack_id is not None:
            member.rack_id = rack_id
        # as Kafka: the assignment goes to a joining member, with every full request (one naming its
        # topics) and when it changed; a moved epoch alone does not send it
        send_assignment = member_epoch == 0 or subscribed is not None or member.assignment != member.reported
        if member.member_epoch != group.group_epoch:
            member.previous_epoch, member.member_epoch = member.member_epoch, group.group_epoch
        if send_assignment:
            member.reported = dict(member.assignment)
        return HeartbeatResult(member_id=member_id, member_epoch=member.member_epoch,
                               heartbeat_interval_ms=interval,
                               assignment=dict(member.assignment) if send_assignment else None)

    def expire_members(self, now: float) -> None:
        """Members that missed their session timeout leave their groups (Kafka's session expiry)."""
        for group in self.groups.values():
            gone = [m for m, member in group.members.items() if member.deadline < now]
            for member_id in gone:
                del group.members[member_id]
            if gone:
                group.group_epoch += 1
                self._assign(group)

    def _layout(self, group: ShareGroup) -> tuple[dict[str, set], dict[uuid.UUID, int]]:
        """Each member's subscribed topic ids, and the partition count of each (existing) topic."""
        subscriptions, counts = {}, {}
        for member_id, member in group.members.items():
            ids = set()
            for name in member.subscribed:
                meta = self._topics(name)
                if meta is not None and meta.partition_count > 0:
                    ids.add(meta.topic_id)
                    counts[meta.topic_id] = meta.partition_count
            subscriptions[member_id] = ids
        return subscriptions, counts

    def _assign(self, group: ShareGroup) -> None:
        """The group's target assignment from the share assignor (assignor.py: Kafka's simple
        assignor), which every member gets with its next heartbeat (the group epoch moved)."""
        subscriptions, counts = self._layout(group)
        current = {m: member.assignment for m, member in group.members.items()}
        target = assign(list(group.members), subscriptions, counts, current)
        group.layout = counts
        for member_id, member in group.members.items():
            member.assignment = {topic_id: sorted(parts) for topic_id, parts in target[member_id].items() if parts}
            for topic_id, partitions in member.assignment.items():
                group.initialized.setdefault(topic_id, set()).update(partitions)

    # -- groups the admin API makes (AlterShareGroupOffsets) ----------------------------------
    def empty_group_for_offsets(self, group_id: str, create: bool) -> tuple[int, str | None]:
        """Kafka's check before the offsets of a share group change: it has no members. A group
        that does not exist is created empty when `create` (AlterShareGroupOffsets: Kafka 4.4
        answers NONE and the group exists afterwards) and is GROUP_ID_NOT_FOUND otherwise
        (DeleteShareGroupOffsets, DeleteGroups). Kafka's NON_EMPTY_GROUP message is "The group is
        not empty.", with no per-topic results."""
        group = self.groups.get(group_id)
        if group is None:
            if not create:
                return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found."
            self.groups[group_id] = ShareGroup(group_id)
            log.info("share group %s created empty by AlterShareGroupOffsets", group_id)
            return ErrorCode.NONE, None
        if group.members:
            return ErrorCode.NON_EMPTY_GROUP, "The group is not empty."
        return ErrorCode.NONE, None

    def mark_initialized(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None:
        group = self.groups.get(group_id)
        if group is not None:
            group.initialized.setdefault(topic_id, set()).add(partition)

    def forget_initialized(self, group_id: str, topic_id: uuid.UUID) -> None:
        """DeleteShareGroupOffsets of a topic: it is no longer one of the group's topics."""
        group = self.groups.get(group_id)
        if group is not None:
            group.initialized.pop(topic_id, None)

    def initialized_partitions(self, group_id: str) -> dict[uuid.UUID, set[int]]:
        """The share-partitions DescribeShareGroupOffsets lists for all topics (topic ids that no
        longer exist included: the caller drops what it cannot resolve)."""
        group = self.groups.get(group_id)
        return {} if group is None else {t: set(p) for t, p in group.initialized.items()}

    # -- share sessions and share-partitions (share-partition leader role) ------------------
    def open_session(self, group_id: str, member_id: str, now: float = 0.0) -> ShareSession:
        """Epoch 0: a new session for the member. One it had before is replaced and what the member
        holds stays acquired by it (Kafka's SharePartitionManager.newContext): it may still
        acknowledge those records in the new session, and their locks expire otherwise."""
        self.evict_idle_sessions(now)
        self.sessions.pop((group_id, member_id), None)
        session = self.sessions[(group_id, member_id)] = ShareSession(group_id, member_id, 1, last_used=now)
        return session

    def evict_idle_sessions(self, now: float) -> list[ShareSession]:
        """Sessions unused for longer than their group's share.session.timeout.ms: their member is
        gone (a killed consumer never closes its session), so they are closed and what they hold
        is released; this keeps the sessions of dead members from piling up."""
        idle = [s for s in self.sessions.values()
                if now - s.last_used > int(self.group_config(s.group_id, "share.session.timeout.ms")) / 1000.0]
        for session in idle:
            self.close_session(session)
        self.released += idle
        return idle

    def session_error(self, group_id: str, member_id: str, epoch: int) -> tuple[int, ShareSession | None]:
        """A session epoch above 0 (or -1, closing) must match the session's next epoch."""
        session = self.sessions.get((group_id, member_id))
        if session is None:
            return ErrorCode.SHARE_SESSION_NOT_FOUND, None
        if epoch != -1 and epoch != session.epoch:
            return ErrorCode.INVALID_SHARE_SESSION_EPOCH, None
        return ErrorCode.NONE, session

    def touch(self, session: ShareSession, now: float) -> None:
        session.last_used = now

    def take_released(self) -> list[ShareSession]:
        """Sessions evicted as idle since the last call (the caller wakes fetches
        waiting on their partitions)."""
        out, self.released = self.released, []
        return out

    def close_session(self, session: ShareSession) -> bool:
        self.sessions.pop((session.group_id, session.member_id), None)
        return self.release_member(session.group_id, session.member_id, session.partitions)

    def connection_closed(self, session: ShareSession) -> bool:
        """The connection that opened `session` closed: Kafka's ShareSessionCache then removes the
        session and the member's acquired records go back to the group (onMemberLeave). A session the
        member has since opened again, on this connection or another, is not this one and stays."""
        if self.sessions.get((session.group_id, session.member_id)) is not session:
            return False
        return self.close_session(session)

    def release_member(self, group_id: str, member_id: str, partitions) -> bool:
        released = False
        for topic, partition, _ in partitions:
            sp = self.partitions.get((group_id, topic, partition))
            if sp is not None:
                released |= sp.release_member(member_id)
        return released

    def share_partition(self, group_id: str, topic: str, partition: int, log_start: int,
                        high_watermark: int, stored=None) -> SharePartition:
        """The share-partition, created on first use from its `stored` state (state_records.ShareState
        read from __share_group_state), else at share.auto.offset.reset's position."""
        key = (group_id, topic, partition)
        sp = self.partitions.get(key)
        if sp is None:
            limit = int(self.group_config(group_id, "share.delivery.count.limit"))
            if stored is not None and stored.start_offset >= 0:
                sp = SharePartition.from_state(stored.start_offset, stored.batches, limit,
                                               self.config.partition_max_record_locks)
            else:  # never stored, or deleted (start offset -1, a state epoch to keep)
                reset = self.group_config(group_id, "share.auto.offset.reset")
                start = log_start if reset == "earliest" else high_watermark
                sp = SharePartition(start, limit, self.config.partition_max_record_locks)
            if stored is not None:
                sp.state_epoch = stored.state_epoch
            self.partitions[key] = sp
            meta = self._topics(topic)
            if meta is not None:
                self.partition_topic_ids[key] = meta.topic_id
        else:
            sp.delivery_limit = int(self.group_config(group_id, "share.delivery.count.limit"))
        if sp.start_offset < log_start:
            sp.reset_start(log_start)  # retention or DeleteRecords removed what it had not done
        return sp

    def _current_topic_id(self, name: str) -> uuid.UUID | None:
        meta = self._topics(name)
        return meta.topic_id if meta is not None else None

    def drop_if_recreated(self, key: tuple[str, str, int]) -> bool:
        """Drop the share-partition `key` (group, topic name, partition) when its topic is gone or
        is another topic now (deleted and created again under the name): Kafka keys share state by
        topic id, so the new topic's share-partition starts fresh. True when it was dropped."""
        known = self.partition_topic_ids.get(key)
        if known is None or known == self._current_topic_id(key[1]):
            return False
        self.partitions.pop(key, None)
        del self.partition_topic_ids[key]
        log.info("share-partition %s/%s-%d dropped: its topic %s was deleted", key[0], key[1], key[2], known)
        return True

    def live_session_partitions(self, session: ShareSession) -> set:
        """The session's partitions, without those of a topic id that no longer exists (a topic
        deleted, perhaps created again under its name: the member sends the new id once its
        heartbeat told it; until then the old one is UNKNOWN_TOPIC_ID)."""
        stale = {entry for entry in session.partitions if self._current_topic_id(entry[0]) != entry[2]}
        if stale:
            session.partitions -= stale
        return session.partitions

    # -- descriptions -------------------------------------------------------------------------
    def list_groups(self, is_local, states=None, types=None) -> list:
        """ListGroups' entries for the share groups coordinated here (type and protocol type
        "share"), with Kafka's case-insensitive state and type filters."""
        if types and "share" not in {t.lower() for t in types}:
            return []
        wanted = {s.lower() for s in states} if states else None
        return [ListedShareGroup(g.group_id, g.state) for g in self.groups.values()
                if is_local(g.group_id) and (wanted is None or g.state.lower() in wanted)]

    def describe(self, group_id: str) -> ShareGroup | None:
        return self.groups.get(group_id)

    def delete_group(self, group_id: str) -> None:
        """DeleteGroups of an empty share group: the group and its share-partitions here go."""
        self.groups.pop(group_id, None)
        for key in [k for k in self.partitions if k[0] == group_id]:
            del self.partitions[key]
            self.partition_topic_ids.pop(key, None)

    def close(self) -> None:
        self.sessions.clear()
        if self.peers is not None:
            self.peers.close()
