"""Offsets: the log's (ListOffsets from each partition's leader) and a group's (OffsetFetch, OffsetCommit
at its coordinator), shared by the groups and consume commands."""
from __future__ import annotations

from ..protocol.error_codes import ErrorCode
from ..protocol.messages import ListOffsetsRequest, OffsetCommitRequest, OffsetFetchRequest
from .client import AdminClient
from .errors import KafkaApiError
from .output import Progress

__all__ = ["EARLIEST", "LATEST", "list_offsets", "committed_offsets", "commit_offsets"]

EARLIEST, LATEST = -2, -1


def committed_offsets(client: AdminClient, group_id: str, coordinator: int | None = None) -> dict[tuple[str, int], int]:
    """The group's committed offsets (every topic), by (topic, partition)."""
    known = [coordinator]

    def once():
        node, known[0] = known[0], None  # a retry asks for the coordinator again: it may have moved
        return _committed_offsets(client, group_id, node)

    return client.retrying(once)


def _committed_offsets(client: AdminClient, group_id: str, coordinator: int | None) -> dict[tuple[str, int], int]:
    node = client.coordinator(group_id) if coordinator is None else coordinator
    # v10 names topics by id only: the CLI reads them by name (v9)
    version = client.version(OffsetFetchRequest, node=node, cap=9)
    if version >= 8:
        request = OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group_id,
                                                                                        topics=None)])
        response = client.send(request, node=node, cap=9)
        entry = response.groups[0]
        code, topics = entry.error_code, entry.topics
    else:
        response = client.send(OffsetFetchRequest(group_id=group_id, topics=None), node=node, floor=2)
        code, topics = response.error_code, response.topics
    if code:
        raise KafkaApiError(code, f"cannot fetch the committed offsets of group '{group_id}'")
    result = {}
    for topic in topics:
        for p in topic.partitions:
            if p.error_code == 0 and p.committed_offset >= 0:
                result[(topic.name, p.partition_index)] = p.committed_offset
    return result


def list_offsets(client: AdminClient, partitions: list[tuple[str, int]], timestamp: int | dict,
                 progress: Progress | None = None, isolation_level: int = 0) -> dict[tuple[str, int], int]:
    """ListOffsets from each partition's leader: EARLIEST, LATEST or a timestamp (-1 when none is later).
    With isolation_level 1 (read_committed) LATEST is the last stable offset."""
    if not partitions:
        return {}
    leaders = client.leaders(sorted({t for t, _ in partitions}))
    by_leader: dict[int, list[tuple[str, int]]] = {}
    for tp in partitions:
        if tp not in leaders:
            raise KafkaApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"partition {tp[0]}:{tp[1]} does not exist")
        if leaders[tp] < 0:
            raise KafkaApiError(ErrorCode.LEADER_NOT_AVAILABLE, f"partition {tp[0]}:{tp[1]} has no leader",
                                "wait for the broker to come back")
        by_leader.setdefault(leaders[tp], []).append(tp)
    result = {}
    for leader, tps in by_leader.items():
        topics: dict[str, list] = {}
        for topic, partition in tps:
            ts = timestamp[(topic, partition)] if isinstance(timestamp, dict) else timestamp
            topics.setdefault(topic, []).append(ListOffsetsRequest.ListOffsetsPartition(
                partition_index=partition, current_leader_epoch=-1, timestamp=ts, max_num_offsets=1))
        request = ListOffsetsRequest(replica_id=-1, isolation_level=isolation_level, topics=[
            ListOffsetsRequest.ListOffsetsTopic(name=t, partitions=ps) for t, ps in topics.items()])
        response = client.send(request, node=leader, floor=2 if isolation_level else 1)
        for topic in response.topics:
            for p in topic.partitions:
                if p.error_code:
                    raise KafkaApiError(p.error_code, f"cannot list the offsets of {topic.name}:{p.partition_index}")
                result[(topic.name, p.partition_index)] = p.offset
        if progress:
            progress.advance(len(tps))
    return result


def commit_offsets(client: AdminClient, group_id: str, coordinator: int, targets: dict) -> None:
    """Commit `targets` ((topic, partition) -> offset) as an admin does: no generation, no member."""
    topics: dict[str, list] = {}
    for (topic, partition), offset in sorted(targets.items()):
        topics.setdefault(topic, []).append(OffsetCommitRequest.OffsetCommitRequestPartition(
            partition_index=partition, committed_offset=offset, committed_leader_epoch=-1, commit_timestamp=-1,
            committed_metadata=""))
    request = OffsetCommitRequest(group_id=group_id, generation_id_or_member_epoch=-1, member_id="",
                                  group_instance_id=None, retention_time_ms=-1, topics=[
                                      OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=ps)
                                      for t, ps in topics.items()])
    response = client.send(request, node=coordinator, cap=8)
    for topic in response.topics:
        for p in topic.partitions:
            if p.error_code:
                raise KafkaApiError(p.error_code, f"cannot commit the offset of {topic.name}:{p.partition_index} "
                                                  f"for group '{group_id}'")
