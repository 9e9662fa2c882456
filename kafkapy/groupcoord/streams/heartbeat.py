"""A StreamsGroupHeartbeat as the streams group coordinator sees it: the decoded request, its result,
and the KafkaError a failed heartbeat raises.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ...protocol.errors import ErrorCode, KafkaError
from .group import Tasks
from .topology import InternalTopic, Topology

OwnedTasks = dict[str, list[int]]


@dataclass(slots=True)
class StreamsHeartbeat:
    """A StreamsGroupHeartbeat, decoded (tasks as subtopology -> partitions; None: unchanged)."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    topology: Topology | None = None
    active_tasks: OwnedTasks | None = None
    standby_tasks: OwnedTasks | None = None
    warmup_tasks: OwnedTasks | None = None
    process_id: str | None = None
    user_endpoint: tuple[str, int] | None = None
    client_tags: dict[str, str] | None = None
    task_offsets: list[tuple[str, int, int]] | None = None
    task_end_offsets: list[tuple[str, int, int]] | None = None
    shutdown_application: bool = False
    endpoint_information_epoch: int = 0
    client_id: str = ""
    client_host: str = ""


@dataclass(slots=True)
class StreamsHeartbeatResult:
    error: int = ErrorCode.NONE
    message: str | None = None
    member_id: str = ""
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    task_offset_interval_ms: int = 0
    acceptable_recovery_lag: int = -1
    status: list[tuple[int, str]] = field(default_factory=list)
    tasks: Tasks | None = None
    endpoint_information_epoch: int = 0
    # endpoint -> (active topic partitions, standby topic partitions), when it changed
    partitions_by_endpoint: list | None = None
    internal_topics_to_create: dict[str, InternalTopic] = field(default_factory=dict)


def _error(code: int, message: str) -> KafkaError:
    return KafkaError(message, code)
