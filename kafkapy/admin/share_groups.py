"""`kafkapy share-groups list|describe|reset-offsets|delete-offsets|delete`: kafka-share-groups.sh as verbs.

Share groups (KIP-932) are described with ShareGroupDescribe, their start offsets and lag read with
DescribeShareGroupOffsets and changed with AlterShareGroupOffsets / DeleteShareGroupOffsets, all sent
to the group's coordinator; listing is ListGroups with the share type on every broker.
"""
from __future__ import annotations

import argparse
import sys

from ..protocol.error_codes import ErrorCode
from ..protocol.messages import (
    AlterShareGroupOffsetsRequest,
    DeleteGroupsRequest,
    DeleteShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequest,
    ListGroupsRequest,
    ShareGroupDescribeRequest,
)
from .client import AdminClient, topic_partitions
from .errors import CliError, KafkaApiError
from .offsets import EARLIEST, LATEST, list_offsets
from .output import emit, print_json, print_table

__all__ = ["list_share_groups", "describe_share_groups", "reset_share_offsets", "delete_share_offsets",
           "delete_share_groups"]


def _listings(client: AdminClient) -> list:
    """Every share group on every broker (ListGroups v5's type filter)."""
    listings, failure = {}, None
    for node_id in sorted(client.brokers()):
        if client.version(ListGroupsRequest, node=node_id) < 5:
            raise CliError("the broker is too old for share groups (ListGroups v5 needed)")
        response = client.send(ListGroupsRequest(states_filter=[], types_filter=["share"]), node=node_id, floor=5)
        if response.error_code:
            failure = KafkaApiError(response.error_code, f"broker {node_id} cannot list its groups")
            continue
        for group in response.groups:
            listings[group.group_id] = group
    if failure and not listings:
        raise failure
    return [listings[g] for g in sorted(listings)]


def _group_ids(client: AdminClient, args: argparse.Namespace) -> list[str]:
    groups = list(args.group or [])
    if getattr(args, "all_groups", False):
        groups = [g.group_id for g in _listings(client)]
    elif not groups:
        raise CliError("give --group G (or GROUP), or --all-groups", exit_code=2)
    return groups


def list_share_groups(client: AdminClient, args: argparse.Namespace) -> int:
    listings = _listings(client)
    if args.state:
        wanted = {s.strip().lower() for s in args.state.split(",")}
        listings = [g for g in listings if g.group_state.lower() in wanted]
    if args.format == "json":
        print_json([{"group": g.group_id, "state": g.group_state} for g in listings])
    elif args.state is not None:
        print_table(["GROUP", "STATE"], [[g.group_id, g.group_state] for g in listings])
    else:
        for g in listings:
            print(g.group_id)
    return 0


def _describe(client: AdminClient, group_id: str):
    """(coordinator, ShareGroupDescribe's group)."""
    def once():
        coordinator = client.coordinator(group_id)
        described = client.send(ShareGroupDescribeRequest(group_ids=[group_id]), node=coordinator).groups[0]
        if described.error_code:
            raise KafkaApiError(described.error_code, f"cannot describe share group '{group_id}'",
                                "list share groups with `kafkapy share-groups list`"
                                if described.error_code == ErrorCode.GROUP_ID_NOT_FOUND else None)
        return coordinator, described
    return client.retrying(once)


def _start_offsets(client: AdminClient, group_id: str, coordinator: int) -> list[dict]:
    """Each share-partition's start offset and lag (DescribeShareGroupOffsets, the members' topics)."""
    R = DescribeShareGroupOffsetsRequest
    response = client.send(R(groups=[R.DescribeShareGroupOffsetsRequestGroup(group_id=group_id, topics=None)]),
                           node=coordinator)
    entry = response.groups[0]
    if entry.error_code:
        raise KafkaApiError(entry.error_code, f"cannot describe the offsets of share group '{group_id}'")
    rows = []
    for topic in sorted(entry.topics, key=lambda t: t.topic_name):
        for p in sorted(topic.partitions, key=lambda p: p.partition_index):
            lag = getattr(p, "lag", -1)
            rows.append({"group": group_id, "topic": topic.topic_name, "partition": p.partition_index,
                         "start_offset": p.start_offset if p.start_offset >= 0 else None,
                         "leader_epoch": p.leader_epoch if p.leader_epoch >= 0 else None,
                         "lag": lag if lag is not None and lag >= 0 else None,
                         "error": ErrorCode(p.error_code).name if p.error_code else None})
    return rows


def _assignment(member) -> dict[str, list[int]]:
    return {t.topic_name: sorted(t.partitions) for t in sorted(member.assignment.topic_partitions,
                                                               key=lambda t: t.topic_name)}


def _assignment_text(assignment: dict[str, list[int]]) -> str:
    return ",".join(f"{t}:{','.join(map(str, p))}" for t, p in assignment.items()) or "-"


def describe_share_groups(client: AdminClient, args: argparse.Namespace) -> int:
    records, tables = [], []
    for group_id in _group_ids(client, args):
        coordinator, g = _describe(client, group_id)
        if args.state:
            record = {"group": group_id, "coordinator": coordinator, "state": g.group_state,
                      "members": len(g.members), "group_epoch": g.group_epoch, "assignment_epoch": g.assignment_epoch}
            address = client.brokers().get(coordinator)
            row = [group_id, f"{address or '?'} ({coordinator})", g.group_state]
            headers = ["GROUP", "COORDINATOR (ID)", "STATE"]
            if args.verbose:
                headers += ["GROUP-EPOCH", "ASSIGNMENT-EPOCH"]
                row += [g.group_epoch, g.assignment_epoch]
            tables.append((headers + ["#MEMBERS"], [row + [len(g.members)]], None))
            records.append(record)
        elif args.members:
            rows = [{"group": group_id, "consumer_id": m.member_id, "host": m.client_host, "client_id": m.client_id,
                     "partitions": sum(len(p) for p in _assignment(m).values()), "member_epoch": m.member_epoch,
                     "assignment": _assignment(m)} for m in g.members]
            headers = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]
            if args.verbose:
                headers.append("MEMBER-EPOCH")
            table = [[r["group"], r["consumer_id"], r["host"], r["client_id"], r["partitions"],
                      _assignment_text(r["assignment"])] + ([r["member_epoch"]] if args.verbose else []) for r in rows]
            tables.append((headers, table, group_id if not rows else None))
            records.append({"group": group_id, "state": g.group_state, "members": rows})
        else:
            rows = _start_offsets(client, group_id, coordinator)
            headers = ["GROUP", "TOPIC", "PARTITION"] + (["LEADER-EPOCH"] if args.verbose else []) + [
                "START-OFFSET", "LAG"]
            table = [[r["group"], r["topic"], r["partition"]] + (
                [r["leader_epoch"] if r["leader_epoch"] is not None else "-"] if args.verbose else []) + [
                r["start_offset"] if r["start_offset"] is not None else "-", r["lag"] if r["lag"] is not None else "-"]
                for r in rows]
            tables.append((headers, table, group_id if not g.members else None))
            records.append({"group": group_id, "state": g.group_state, "partitions": rows})
    if args.format == "json":
        print_json(records)
        return 0
    for headers, table, empty in tables:
        print()
        if empty:
            print(f"Share group '{empty}' has no active members.", file=sys.stderr)
        if table:
            print_table(headers, table)
    return 0


def _topic_partitions(client: AdminClient, specs: list[str]) -> list[tuple[str, int]]:
    wanted: list[tuple[str, int]] = []
    for spec in specs:
        name, sep, parts = spec.partition(":")
        if sep:
            try:
                wanted += [(name, int(p)) for p in parts.split(",") if p.strip()]
            except ValueError:
                raise CliError(f"bad --topic {spec!r}: expected TOPIC:P,P,...", exit_code=2) from None
        else:
            wanted += [(name, p) for p in topic_partitions(client, [name])[name]]
    return sorted(set(wanted))


def _inactive(client: AdminClient, group_id: str) -> int:
    """The coordinator of `group_id`, which must have no members (Kafka refuses NON_EMPTY_GROUP)."""
    coordinator, g = _describe(client, group_id)
    if g.members:
        raise CliError(f"share group '{group_id}' has active members (state {g.group_state}); "
                       f"stop its consumers first")
    return coordinator


def reset_share_offsets(client: AdminClient, args: argparse.Namespace) -> int:
    from .groups import parse_datetime, parse_duration

    results = []
    for group_id in _group_ids(client, args):
        coordinator = _inactive(client, group_id)
        if args.all_topics:
            described = _start_offsets(client, group_id, coordinator)
            partitions = sorted({(r["topic"], r["partition"]) for r in described})
        elif args.topic:
            partitions = _topic_partitions(client, args.topic)
        else:
            raise CliError("say which partitions: --topic TOPIC[:P,P...] or --all-topics", exit_code=2)
        if args.to_earliest:
            targets = list_offsets(client, partitions, EARLIEST)
        elif args.to_latest:
            targets = list_offsets(client, partitions, LATEST)
        elif args.to_offset is not None:
            earliest, latest = list_offsets(client, partitions, EARLIEST), list_offsets(client, partitions, LATEST)
            # as kafka-share-groups.sh: an offset out of the log's range is moved into it
            targets = {tp: min(max(args.to_offset, earliest[tp]), latest[tp]) for tp in partitions}
        elif args.to_datetime or args.by_duration:
            import time

            ts = parse_datetime(args.to_datetime) if args.to_datetime else \
                int(time.time() * 1000) - parse_duration(args.by_duration)
            found, latest = list_offsets(client, partitions, ts), list_offsets(client, partitions, LATEST)
            targets = {tp: found[tp] if found[tp] >= 0 else latest[tp] for tp in partitions}
        else:
            raise CliError("say where to: --to-earliest, --to-latest, --to-offset N, --to-datetime or "
                           "--by-duration", exit_code=2)
        if args.execute and targets:
            A = AlterShareGroupOffsetsRequest
            by_topic: dict[str, list] = {}
            for (topic, partition), offset in sorted(targets.items()):
                by_topic.setdefault(topic, []).append(
                    A.AlterShareGroupOffsetsRequestPartition(partition_index=partition, start_offset=offset))
            response = client.send(A(group_id=group_id, topics=[
                A.AlterShareGroupOffsetsRequestTopic(topic_name=t, partitions=ps) for t, ps in by_topic.items()]),
                node=coordinator)
            if response.error_code:
                raise KafkaApiError(response.error_code, f"cannot reset the offsets of share group '{group_id}'")
            for topic in response.responses:
                for p in topic.partitions:
                    if p.error_code:
                        raise KafkaApiError(p.error_code, f"cannot reset {topic.topic_name}:{p.partition_index} "
                                                          f"of share group '{group_id}'")
        results += [{"group": group_id, "topic": t, "partition": p, "new_start_offset": off}
                    for (t, p), off in sorted(targets.items())]
    if args.format == "json":
        print_json(results)
    else:
        print()
        print_table(["GROUP", "TOPIC", "PARTITION", "NEW-START-OFFSET"],
                    [[r["group"], r["topic"], r["partition"], r["new_start_offset"]] for r in results])
        if not args.execute:
            print("\n(a preview: nothing changed; add --execute to reset the offsets)", file=sys.stderr)
    return 0


def delete_share_offsets(client: AdminClient, args: argparse.Namespace) -> int:
    group_id = args.group[0] if args.group else None
    if not group_id or not args.topic:
        raise CliError("share-groups delete-offsets needs --group G and --topic TOPIC", exit_code=2)
    D = DeleteShareGroupOffsetsRequest
    response = client.send(D(group_id=group_id, topics=[D.DeleteShareGroupOffsetsRequestTopic(topic_name=t)
                                                        for t in dict.fromkeys(args.topic)]),
                           node=client.coordinator(group_id))
    if response.error_code:
        raise KafkaApiError(response.error_code, f"cannot delete offsets of share group '{group_id}'")
    rows = [{"topic": t.topic_name,
             "status": "Successful" if not t.error_code else f"Error: {ErrorCode(t.error_code).name}"}
            for t in response.responses]
    emit(args.format, rows, ["TOPIC", "STATUS"], ["topic", "status"])
    failed = [r for r in rows if r["status"] != "Successful"]
    if failed:
        raise CliError(f"the offsets of {len(failed)} topic(s) were not deleted")
    return 0


def delete_share_groups(client: AdminClient, args: argparse.Namespace) -> int:
    deleted, failure = [], None
    for group_id in _group_ids(client, args):
        _describe(client, group_id)  # a share group (GROUP_ID_NOT_FOUND for another kind): never a classic one
        response = client.send(DeleteGroupsRequest(groups_names=[group_id]), node=client.coordinator(group_id))
        code = response.results[0].error_code
        if code:
            failure = failure or KafkaApiError(code, f"cannot delete share group '{group_id}'")
        else:
            deleted.append(group_id)
    if args.format == "json":
        print_json({"deleted": deleted})
    else:
        for group_id in deleted:
            print(f"Deleted share group '{group_id}'.")
    if failure:
        raise failure
    return 0
