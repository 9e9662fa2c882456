"""`kafkapy groups list|describe|reset-offsets|delete|delete-offsets`: kafka-consumer-groups.sh as verbs."""
from __future__ import annotations

import argparse
import re
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime

from ..protocol.consumer_protocol import decode_assignment as _decode_assignment
from ..protocol.error_codes import ErrorCode
from ..protocol.messages import (
    ConsumerGroupDescribeRequest,
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    ListGroupsRequest,
    OffsetDeleteRequest,
)
from .client import AdminClient, topic_partitions
from .errors import CliError, KafkaApiError
from .offsets import EARLIEST, LATEST, commit_offsets, committed_offsets, list_offsets
from .output import Progress, emit, print_json, print_table

__all__ = ["list_groups", "describe_groups", "reset_offsets", "delete_groups", "delete_offsets",
           "decode_assignment", "describe_group", "parse_duration", "parse_datetime"]

_INACTIVE = {"Empty", "Dead"}


@dataclass(slots=True)
class Member:
    member_id: str
    client_id: str
    host: str
    instance_id: str | None
    assignment: dict[str, list[int]] = field(default_factory=dict)
    # consumer-protocol groups (KIP-848) only
    member_epoch: int | None = None
    target_assignment: dict[str, list[int]] | None = None
    member_type: str | None = None  # "consumer" or "classic" (ConsumerGroupDescribe v1), None if unknown


@dataclass(slots=True)
class Group:
    group_id: str
    state: str
    protocol_type: str
    protocol: str  # the assignment strategy (classic) or server assignor (consumer)
    coordinator: int
    members: list[Member]
    group_type: str = "classic"
    group_epoch: int | None = None
    assignment_epoch: int | None = None


def decode_assignment(data: bytes) -> dict[str, list[int]]:
    """The partitions in a consumer protocol Assignment; {} for no or unreadable bytes (a display
    never fails on another client's assignment)."""
    try:
        return _decode_assignment(data)
    except ValueError:
        return {}


def _all_group_listings(client: AdminClient) -> list:
    """Every group on every broker (ListGroups; its group_type is "" before v5)."""
    listings, failure = {}, None
    for node_id in sorted(client.brokers()):
        response = client.send(ListGroupsRequest(states_filter=[], types_filter=[]), node=node_id)
        if response.error_code:
            failure = KafkaApiError(response.error_code, f"broker {node_id} cannot list its groups")
            continue
        for group in response.groups:
            listings[group.group_id] = group
    if failure and not listings:
        raise failure
    return [listings[g] for g in sorted(listings)]


def _group_type(listing, version: int) -> str:
    """A listed group's type: ListGroups v5 says; before it, every group is classic."""
    return (listing.group_type or "classic") if version >= 5 else "classic"


def list_groups(client: AdminClient, args: argparse.Namespace) -> int:
    version = client.version(ListGroupsRequest)
    listings = _all_group_listings(client)
    states = {}
    show_type = getattr(args, "type", None) is not None
    if args.state is not None or args.format == "json":
        if version >= 4:
            states = {g.group_id: g.group_state for g in listings}
        else:
            states = {g.group_id: describe_group(client, g.group_id).state for g in listings}
    if args.state:
        wanted = {s.strip().lower() for s in args.state.split(",")}
        listings = [g for g in listings if states.get(g.group_id, "").lower() in wanted]
    if show_type and args.type:
        wanted_types = {t.strip().lower() for t in args.type.split(",")}
        listings = [g for g in listings if _group_type(g, version) in wanted_types]
    records = [{"group": g.group_id, "protocol_type": g.protocol_type, "state": states.get(g.group_id),
                "type": _group_type(g, version)} for g in listings]
    if args.format == "json":
        print_json(records)
    elif args.state is not None or show_type:
        headers, keys = ["GROUP"], ["group"]
        if show_type:
            headers.append("TYPE")
            keys.append("type")
        if args.state is not None:
            headers.append("STATE")
            keys.append("state")
        print_table(headers, [[r[k] for k in keys] for r in records])
    else:
        for record in records:
            print(record["group"])
    return 0


def describe_group(client: AdminClient, group_id: str) -> Group:
    return client.retrying(lambda: _describe_group(client, group_id))


def _consumer_group_describe(client: AdminClient, group_id: str, coordinator: int) -> Group | None:
    """The group as ConsumerGroupDescribe shows it (KIP-848), or None when it is not a consumer-protocol
    group (GROUP_ID_NOT_FOUND) or the broker predates the API: then DescribeGroups tells, as Kafka's
    admin client does."""
    conn = client.node(coordinator)
    if ConsumerGroupDescribeRequest.API_KEY not in conn.versions:
        return None
    version = client.version(ConsumerGroupDescribeRequest, node=coordinator)
    response = client.send(ConsumerGroupDescribeRequest(group_ids=[group_id]), node=coordinator)
    described = response.groups[0]
    if described.error_code in (ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.UNSUPPORTED_VERSION):
        return None
    if described.error_code:
        raise KafkaApiError(described.error_code, f"cannot describe group '{group_id}'")

    def partitions(assignment) -> dict[str, list[int]]:
        return {t.topic_name: sorted(t.partitions) for t in assignment.topic_partitions}

    types = {0: "classic", 1: "consumer"}
    members = [Member(m.member_id, m.client_id, m.client_host, m.instance_id, partitions(m.assignment),
                      member_epoch=m.member_epoch, target_assignment=partitions(m.target_assignment),
                      member_type=types.get(m.member_type) if version >= 1 else None)
               for m in described.members]
    return Group(group_id, described.group_state, "consumer", described.assignor_name, coordinator, members,
                 group_type="consumer", group_epoch=described.group_epoch,
                 assignment_epoch=described.assignment_epoch)


def _describe_group(client: AdminClient, group_id: str) -> Group:
    coordinator = client.coordinator(group_id)
    modern = _consumer_group_describe(client, group_id, coordinator)
    if modern is not None:
        return modern
    response = client.send(DescribeGroupsRequest(groups=[group_id]), node=coordinator)
    described = response.groups[0]
    if described.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
        # DescribeGroups v6 (KIP-1043) says what v0-5 said with a Dead group and no error
        return Group(group_id, "Dead", "", "", coordinator, [])
    if described.error_code:
        raise KafkaApiError(described.error_code, f"cannot describe group '{group_id}'")
    members = [Member(m.member_id, m.client_id, m.client_host, m.group_instance_id,
                      decode_assignment(m.member_assignment) if described.protocol_type == "consumer" else {})
               for m in described.members]
    return Group(group_id, described.group_state, described.protocol_type, described.protocol_data,
                 coordinator, members)


def _group_ids(client: AdminClient, args: argparse.Namespace) -> list[str]:
    groups = list(args.group or [])
    if getattr(args, "all_groups", False):
        groups = [g.group_id for g in _all_group_listings(client)]
    elif not groups:
        raise CliError("give --group G (or GROUP), or --all-groups", exit_code=2)
    return groups


def _offset_rows(client: AdminClient, group: Group, committed: dict) -> list[dict]:
    owners: dict[tuple[str, int], Member] = {}
    for member in group.members:
        for topic, parts in member.assignment.items():
            for p in parts:
                owners[(topic, p)] = member
    partitions = sorted(set(committed) | set(owners))
    ends = list_offsets(client, partitions, LATEST) if partitions else {}
    rows = []
    for tp in partitions:
        member = owners.get(tp)
        current = committed.get(tp)
        end = ends.get(tp)
        rows.append({"group": group.group_id, "topic": tp[0], "partition": tp[1], "current_offset": current,
                     "log_end_offset": end, "lag": None if current is None or end is None else end - current,
                     "consumer_id": member.member_id if member else None, "host": member.host if member else None,
                     "client_id": member.client_id if member else None})
    for member in group.members:  # members with nothing assigned, as Kafka lists them
        if not member.assignment:
            rows.append({"group": group.group_id, "topic": None, "partition": None, "current_offset": None,
                         "log_end_offset": None, "lag": None, "consumer_id": member.member_id, "host": member.host,
                         "client_id": member.client_id})
    return rows


_OFFSET_HEADERS = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                   "HOST", "CLIENT-ID"]
_OFFSET_KEYS = ["group", "topic", "partition", "current_offset", "log_end_offset", "lag", "consumer_id", "host",
                "client_id"]


def describe_groups(client: AdminClient, args: argparse.Namespace) -> int:
    output = []
    missing = []
    for group_id in _group_ids(client, args):
        group = describe_group(client, group_id)
        if group.state == "Dead":
            missing.append(group_id)
            continue
        if args.state:
            record = {"group": group_id, "coordinator": group.coordinator, "assignment_strategy": group.protocol,
                      "state": group.state, "members": len(group.members), "type": group.group_type,
                      "group_epoch": group.group_epoch, "target_assignment_epoch": group.assignment_epoch}
            output.append(("state", record))
        elif args.members:
            records = []
            for m in group.members:
                record = {"group": group_id, "consumer_id": m.member_id, "group_instance_id": m.instance_id,
                          "host": m.host, "client_id": m.client_id,
                          "partitions": sum(len(p) for p in m.assignment.values()),
                          "assignment": {t: sorted(p) for t, p in sorted(m.assignment.items())}}
                if group.group_type == "consumer":
                    record.update(member_epoch=m.member_epoch, member_type=m.member_type,
                                  target_assignment_epoch=group.assignment_epoch,
                                  target_assignment={t: sorted(p) for t, p in
                                                     sorted((m.target_assignment or {}).items())})
                records.append(record)
            output.append(("members", (group, records)))
        else:
            rows = _offset_rows(client, group, committed_offsets(client, group_id, group.coordinator))
            output.append(("offsets", (group, rows)))
    if args.format == "json":
        records = []
        for kind, value in output:
            if kind == "state":
                records.append(value)
            else:
                group, rows = value
                records.append({"group": group.group_id, "state": group.state, "type": group.group_type,
                                "members" if kind == "members" else "partitions": rows})
        print_json(records)
    else:
        for kind, value in output:
            print()
            if kind == "state":
                row = [value["group"], f"{_host(client, value['coordinator'])} ({value['coordinator']})",
                       value["assignment_strategy"] or "", value["state"]]
                headers = ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE"]
                if args.verbose:
                    # Kafka 4.0's --state --verbose: the epochs mean something for a consumer-protocol group only
                    headers += ["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH"]
                    row += [value["group_epoch"] if value["group_epoch"] is not None else "-",
                            value["target_assignment_epoch"] if value["target_assignment_epoch"] is not None else "-"]
                print_table(headers + ["#MEMBERS"], [row + [value["members"]]])
                continue
            group, rows = value
            if group.state == "Empty" or not group.members:
                print(f"Consumer group '{group.group_id}' has no active members.", file=sys.stderr)
            if kind == "members":
                headers = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
                keys = ["group", "consumer_id", "host", "client_id", "partitions"]
                if args.verbose:
                    if group.group_type == "consumer":
                        headers = ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS",
                                   "CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"]
                        keys = ["group", "consumer_id", "instance_text", "host", "client_id", "partitions",
                                "member_epoch", "assignment_text", "target_assignment_epoch", "target_text"]
                    else:
                        headers.append("ASSIGNMENT")
                        keys.append("assignment_text")
                    for row in rows:
                        row["assignment_text"] = _assignment_text(row["assignment"])
                        row["target_text"] = _assignment_text(row.get("target_assignment") or {})
                        row["instance_text"] = row["group_instance_id"] or "-"
                if rows:
                    emit("table", rows, headers, keys)
            elif rows:
                emit("table", rows, _OFFSET_HEADERS, _OFFSET_KEYS)
    if missing:
        raise KafkaApiError(ErrorCode.GROUP_ID_NOT_FOUND, f"consumer group '{missing[0]}' does not exist")
    return 0


def _assignment_text(assignment: dict[str, list[int]]) -> str:
    return ",".join(f"{t}({','.join(map(str, p))})" for t, p in assignment.items()) or "-"


def _host(client: AdminClient, node_id: int) -> str:
    address = client.brokers().get(node_id)
    return str(address) if address else "?"


# -- reset-offsets ---------------------------------------------------------------------------

_DURATION = re.compile(r"^(-)?P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$", re.I)


def parse_duration(text: str) -> int:
    """An ISO-8601 duration (Kafka's --by-duration: PnDTnHnMnS) in milliseconds."""
    match = _DURATION.match(text.strip())
    if not match or text.strip().upper() in ("P", "PT", "-P", "-PT"):
        raise CliError(f"bad duration {text!r}: expected ISO-8601 like PT1H30M or P2D", exit_code=2)
    sign, days, hours, minutes, seconds = match.groups()
    ms = ((int(days or 0) * 24 + int(hours or 0)) * 60 + int(minutes or 0)) * 60_000 + int(
        float(seconds or 0) * 1000)
    return -ms if sign else ms


def parse_datetime(text: str) -> int:
    """Kafka's --to-datetime 'YYYY-MM-DDTHH:mm:SS.sss' (local time unless a zone is given) as epoch ms."""
    value = text.strip()
    if value.endswith("Z"):
        value = value[:-1] + "+00:00"
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise CliError(f"bad datetime {text!r}: expected YYYY-MM-DDTHH:mm:SS.sss[+HH:MM]", exit_code=2) from None
    if moment.tzinfo is None:
        moment = moment.astimezone()
    return int(moment.timestamp() * 1000)


def _reset_partitions(client: AdminClient, args: argparse.Namespace, committed: dict) -> list[tuple[str, int]]:
    if args.all_topics:
        partitions = sorted(committed)
        topics = sorted({t for t, _ in partitions})
        if topics:
            existing = client.metadata(topics)
            alive = {(t.name, p.partition_index) for t in existing.topics if not t.error_code for p in t.partitions}
            partitions = [tp for tp in partitions if tp in alive]
        return partitions
    if not args.topic:
        raise CliError("say which partitions: --topic TOPIC[:P,P...] (repeatable) or --all-topics", exit_code=2)
    wanted: list[tuple[str, int]] = []
    plain = []
    for spec in args.topic:
        name, sep, parts = spec.partition(":")
        if sep:
            try:
                wanted += [(name, int(p)) for p in parts.split(",") if p.strip()]
            except ValueError:
                raise CliError(f"bad --topic {spec!r}: expected TOPIC:P,P,...", exit_code=2) from None
        else:
            plain.append(name)
    existing = topic_partitions(client, sorted({t for t, _ in wanted} | set(plain)))
    for name, part in wanted:
        if part not in existing[name]:
            raise KafkaApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"partition {name}:{part} does not exist")
    wanted += [(name, p) for name in plain for p in existing[name]]
    return sorted(set(wanted))


def _read_plan(path: str, groups: list[str]) -> dict[str, dict[tuple[str, int], int]]:
    """Kafka's reset plan CSV: `topic,partition,offset` lines (one group) or `group,topic,partition,offset`."""
    plan: dict[str, dict[tuple[str, int], int]] = {}
    try:
        with open(path, encoding="utf-8") as handle:
            lines = [line.strip() for line in handle if line.strip()]
    except OSError as exc:
        raise CliError(f"cannot read --from-file {path}: {exc.strerror or exc}", exit_code=2) from None
    for number, line in enumerate(lines, 1):
        fields = [f.strip() for f in line.split(",")]
        if len(fields) == 3 and len(groups) == 1:
            fields = [groups[0], *fields]
        try:
            group, topic, partition, offset = fields
            plan.setdefault(group, {})[(topic, int(partition))] = int(offset)
        except ValueError:
            raise CliError(f"{path} line {number}: expected {'' if len(groups) == 1 else 'GROUP,'}TOPIC,PARTITION,"
                           f"OFFSET, not {line!r}", exit_code=2) from None
    return plan


def _target_offsets(client: AdminClient, args: argparse.Namespace, partitions: list, committed: dict,
                    progress: Progress) -> dict[tuple[str, int], int]:
    earliest = list_offsets(client, partitions, EARLIEST, progress)
    latest = list_offsets(client, partitions, LATEST, progress)

    def clamp(tp, offset):  # Kafka moves an out-of-range target to the nearest end
        return min(max(offset, earliest[tp]), latest[tp])

    if args.to_earliest:
        return dict(earliest)
    if args.to_latest:
        return dict(latest)
    if args.to_current:
        return {tp: committed.get(tp, latest[tp]) for tp in partitions}
    if args.to_offset is not None:
        return {tp: clamp(tp, args.to_offset) for tp in partitions}
    if args.shift_by is not None:
        return {tp: clamp(tp, committed.get(tp, latest[tp]) + args.shift_by) for tp in partitions}
    if args.to_datetime is not None or args.by_duration is not None:
        ts = parse_datetime(args.to_datetime) if args.to_datetime is not None else int(
            time.time() * 1000) - parse_duration(args.by_duration)
        found = list_offsets(client, partitions, ts, progress)
        return {tp: latest[tp] if found[tp] < 0 else found[tp] for tp in partitions}
    raise CliError("say where to: --to-earliest, --to-latest, --to-current, --to-offset N, --shift-by N, "
                   "--to-datetime DT or --by-duration PnDTnHnMnS", exit_code=2)


def reset_offsets(client: AdminClient, args: argparse.Namespace) -> int:
    if args.execute and args.dry_run:
        raise CliError("give --dry-run or --execute, not both", exit_code=2)
    if args.all_topics and args.topic:
        raise CliError("give --topic or --all-topics, not both", exit_code=2)
    if args.from_file and (args.all_topics or args.topic):
        raise CliError("--from-file names its partitions: leave out --topic and --all-topics", exit_code=2)
    groups = _group_ids(client, args)
    plan = _read_plan(args.from_file, groups) if args.from_file else {}
    results = []
    for group_id in groups:
        group = describe_group(client, group_id)
        if group.state not in _INACTIVE:
            raise CliError(f"assignments can only be reset if the group '{group_id}' is inactive, but the current "
                           f"state is {group.state}; stop its consumers first")
        committed = committed_offsets(client, group_id, group.coordinator)
        if args.from_file:
            targets = plan.get(group_id, {})
            partitions = sorted(targets)
            progress = Progress(len(partitions), f"reset {group_id}")
        else:
            partitions = _reset_partitions(client, args, committed)
            progress = Progress(len(partitions) * 3, f"reset {group_id}")
            targets = _target_offsets(client, args, partitions, committed, progress)
        if args.execute and targets:
            commit_offsets(client, group_id, group.coordinator, targets)
            progress.advance(len(partitions))
        progress.close()
        results += [{"group": group_id, "topic": t, "partition": p, "previous_offset": committed.get((t, p)),
                     "new_offset": off} for (t, p), off in sorted(targets.items())]
    if args.export:  # Kafka's CSV, which --from-file reads back
        for r in results:
            print(",".join(str(v) for v in ([r["group"]] if len(groups) > 1 else []) +
                           [r["topic"], r["partition"], r["new_offset"]]))
    elif args.format == "json":
        print_json(results)
    else:
        print()
        print_table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
                    [[r["group"], r["topic"], r["partition"], r["new_offset"]] for r in results])
        if not args.execute:
            print("\n(a preview: nothing changed; add --execute to reset the offsets)", file=sys.stderr)
    return 0


# -- delete ----------------------------------------------------------------------------------

def delete_groups(client: AdminClient, args: argparse.Namespace) -> int:
    deleted, failure = [], None
    for group_id in _group_ids(client, args):
        response = client.send(DeleteGroupsRequest(groups_names=[group_id]), node=client.coordinator(group_id))
        code = response.results[0].error_code
        if code:
            hint = "stop the group's consumers first" if code == ErrorCode.NON_EMPTY_GROUP else None
            failure = failure or KafkaApiError(code, f"cannot delete group '{group_id}'", hint)
        else:
            deleted.append(group_id)
    if args.format == "json":
        print_json({"deleted": deleted})
    else:
        for group_id in deleted:
            print(f"Deleted consumer group '{group_id}'.")
    if failure:
        raise failure
    return 0


def delete_offsets(client: AdminClient, args: argparse.Namespace) -> int:
    group_id = args.group[0] if args.group else None
    if not group_id or not args.topic:
        raise CliError("groups delete-offsets needs --group G and --topic TOPIC[:P,P...]", exit_code=2)
    wanted: dict[str, list[int]] = {}
    for spec in args.topic:
        name, sep, parts = spec.partition(":")
        if sep:
            try:
                wanted.setdefault(name, []).extend(int(p) for p in parts.split(",") if p.strip())
            except ValueError:
                raise CliError(f"bad --topic {spec!r}: expected TOPIC:P,P,...", exit_code=2) from None
        else:
            wanted.setdefault(name, []).extend(topic_partitions(client, [name])[name])
    request = OffsetDeleteRequest(group_id=group_id, topics=[
        OffsetDeleteRequest.OffsetDeleteRequestTopic(
            name=t, partitions=[OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=p)
                                for p in sorted(set(ps))]) for t, ps in wanted.items()])
    response = client.send(request, node=client.coordinator(group_id))
    if response.error_code:
        raise KafkaApiError(response.error_code, f"cannot delete offsets of group '{group_id}'")
    rows = [{"topic": t.name, "partition": p.partition_index,
             "status": "Successful" if not p.error_code else f"Error: {ErrorCode(p.error_code).name}"}
            for t in response.topics for p in t.partitions]
    emit(args.format, rows, ["TOPIC", "PARTITION", "STATUS"], ["topic", "partition", "status"])
    failed = [r for r in rows if r["status"] != "Successful"]
    if failed:
        raise CliError(f"{len(failed)} offset(s) not deleted; a group that still consumes a topic keeps its "
                       f"offsets (GROUP_SUBSCRIBED_TO_TOPIC)")
    return 0


