"""`kafkapy consume`: read a topic to stdout in the spirit of kcat -C (offsets, -e, -c, -f, -J)."""
from __future__ import annotations

import argparse
import json
import re
import sys
import time
from dataclasses import dataclass

from ..protocol.error_codes import ErrorCode
from ..protocol.errors import CorruptRecordError
from ..protocol.messages import FetchRequest
from ..protocol.records import HEADER_SIZE, iter_records, read_batch_header
from .client import AdminClient, topic_partitions
from .errors import CliError, KafkaApiError
from .offsets import EARLIEST, LATEST, committed_offsets, list_offsets
from .output import Progress

__all__ = ["consume", "parse_offset_spec", "OffsetSpec", "Formatter"]

_MAX_WAIT_MS = 500
_PARTITION_MAX_BYTES = 1 << 20


@dataclass(slots=True)
class OffsetSpec:
    """Where to start (kind: beginning, end, stored, absolute, relative, timestamp) and an optional end time."""

    kind: str = "beginning"
    value: int = 0
    end_timestamp: int | None = None


def parse_offset_spec(values: list[str] | None) -> OffsetSpec:
    """kcat's -o: beginning | end | stored | <offset> | -<n> (n before the end) | s@<ts-ms> | e@<ts-ms>."""
    spec = OffsetSpec()
    for text in values or ():
        text = text.strip()
        if text in ("beginning", "end", "stored"):
            spec.kind = text
        elif re.fullmatch(r"-\d+", text):
            spec.kind, spec.value = "relative", int(text[1:])
        elif text.isdigit():
            spec.kind, spec.value = "absolute", int(text)
        elif re.fullmatch(r"s@\d+", text):
            spec.kind, spec.value = "timestamp", int(text[2:])
        elif re.fullmatch(r"e@\d+", text):
            spec.end_timestamp = int(text[2:])
        else:
            raise CliError(f"bad offset {text!r}: expected beginning, end, stored, <offset>, -<n>, s@<ts-ms> or "
                           f"e@<ts-ms>", exit_code=2)
    return spec


class Formatter:
    """kcat's -f tokens: %t topic, %p partition, %o offset, %k key, %K key length, %s value, %S value length,
    %h headers (name=value,...), %T timestamp ms, %% percent; \\n \\t \\\\ escapes."""

    _TOKEN = re.compile(r"%[tpokKsShT%]|\\[ntr\\]")

    def __init__(self, fmt: str):
        self.parts: list = []
        pos = 0
        for match in self._TOKEN.finditer(fmt):
            if match.start() > pos:
                self.parts.append(fmt[pos:match.start()].encode())
            token = match.group()
            if token.startswith("\\"):
                self.parts.append({"n": b"\n", "t": b"\t", "r": b"\r", "\\": b"\\"}[token[1]])
            elif token == "%%":
                self.parts.append(b"%")
            else:
                self.parts.append(token[1])
            pos = match.end()
        if pos < len(fmt):
            self.parts.append(fmt[pos:].encode())

    def format(self, topic: str, partition: int, record) -> bytes:
        out = []
        for part in self.parts:
            if isinstance(part, bytes):
                out.append(part)
            elif part == "s":
                out.append(record.value or b"")
            elif part == "k":
                out.append(record.key or b"")
            elif part == "t":
                out.append(topic.encode())
            elif part == "p":
                out.append(str(partition).encode())
            elif part == "o":
                out.append(str(record.offset).encode())
            elif part == "T":
                out.append(str(record.timestamp).encode())
            elif part == "S":
                out.append(str(-1 if record.value is None else len(record.value)).encode())
            elif part == "K":
                out.append(str(-1 if record.key is None else len(record.key)).encode())
            elif part == "h":
                out.append(b",".join(k.encode("utf-8", "surrogateescape") + b"=" + (v or b"")
                                     for k, v in record.headers))
        return b"".join(out)


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", "backslashreplace")


def _json_line(topic: str, partition: int, record, timestamp_type: int, broker: int) -> bytes:
    """kcat -J's envelope, one object per line."""
    headers = []
    for key, value in record.headers:
        headers += [key, _text(value)]
    envelope = {"topic": topic, "partition": partition, "offset": record.offset,
                "tstype": "logappend" if timestamp_type else "create", "ts": record.timestamp, "broker": broker,
                "headers": headers or None, "key": _text(record.key), "payload": _text(record.value)}
    return json.dumps(envelope, ensure_ascii=False).encode() + b"\n"


def _start_positions(client: AdminClient, args: argparse.Namespace, spec: OffsetSpec,
                     partitions: list[tuple[str, int]], prefer_committed: bool = False) -> dict[tuple[str, int], int]:
    """Where each partition starts: the group's committed offset when there is one (unless -o says
    otherwise on the first assignment), else the -o spec."""
    if spec.kind == "stored" and not args.group:
        raise CliError("-o stored needs --group G", exit_code=2)
    if not partitions:
        return {}
    isolation = 1 if args.isolation_level == "read_committed" else 0
    earliest = list_offsets(client, partitions, EARLIEST, isolation_level=isolation)
    latest = list_offsets(client, partitions, LATEST, isolation_level=isolation)
    stored = committed_offsets(client, args.group) if args.group else {}
    positions = {}
    found = list_offsets(client, partitions, spec.value, isolation_level=isolation) \
        if spec.kind == "timestamp" else {}
    for tp in partitions:
        if args.group and tp in stored and (prefer_committed or spec.kind == "stored" or not args.offset):
            positions[tp] = stored[tp]
        elif spec.kind == "stored":
            positions[tp] = stored.get(tp, earliest[tp])
        elif spec.kind == "beginning":
            positions[tp] = earliest[tp]
        elif spec.kind == "end":
            positions[tp] = latest[tp]
        elif spec.kind == "absolute":
            positions[tp] = min(max(spec.value, earliest[tp]), latest[tp])
        elif spec.kind == "relative":
            positions[tp] = max(latest[tp] - spec.value, earliest[tp])
        else:
            positions[tp] = latest[tp] if found[tp] < 0 else found[tp]
    return positions


def consume(client: AdminClient, args: argparse.Namespace) -> int:
    spec = parse_offset_spec(args.offset)
    if args.count is not None and args.count < 0:
        raise CliError("-c/--count must be at least 0", exit_code=2)
    existing = topic_partitions(client, [args.topic])[args.topic]
    if args.partition is not None:
        if args.partition not in existing:
            raise KafkaApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                f"partition {args.partition} of '{args.topic}' does not exist")
        existing = [args.partition]
    read_committed = args.isolation_level == "read_committed"
    member = None
    if args.group:  # a member of the group: the group says which partitions are ours
        if args.partition is not None:
            raise CliError("with --group the group assigns the partitions: leave out -p/--partition", exit_code=2)
        from .membership import GroupMember

        member = GroupMember(client, args.group, [args.topic])
        partitions = _assigned(args.topic, member.join())
    else:
        partitions = [(args.topic, p) for p in existing]
    positions = _start_positions(client, args, spec, partitions)
    json_out = args.json or args.format == "json"
    if args.fmt is not None:
        formatter = Formatter(args.fmt)
    else:
        key_part = "" if args.key_delimiter is None else "%k" + args.key_delimiter.replace("%", "%%")
        formatter = Formatter(key_part + "%s" + args.delimiter)
    out = sys.stdout.buffer
    progress = Progress(args.count, f"consume {args.topic}") if args.count and not out.isatty() else None
    consumed = 0
    done: set[tuple[str, int]] = set()
    leaders = client.leaders([args.topic])
    try:
        while True:
            if args.count is not None and consumed >= args.count:
                break
            if member is not None and member.heartbeat_due() and not member.heartbeat():
                member.commit(positions)  # the group rebalances: hand over where we are, then rejoin
                partitions = _assigned(args.topic, member.join())
                positions = _start_positions(client, args, spec, partitions, prefer_committed=True)
                done.clear()
                continue
            active = [tp for tp in partitions if tp not in done]
            if not active:
                if member is not None and not partitions and not args.exit_at_end:
                    time.sleep(0.2)  # nothing assigned (more members than partitions): keep heartbeating
                    continue
                break
            by_leader: dict[int, list] = {}
            for tp in active:
                by_leader.setdefault(leaders.get(tp, -1), []).append(tp)
            if -1 in by_leader:  # no leader right now: look again shortly
                time.sleep(0.2)
                leaders = client.leaders([args.topic])
                continue
            for leader, tps in by_leader.items():
                if args.count is not None and consumed >= args.count:
                    break
                request = FetchRequest(replica_id=-1, max_wait_ms=_MAX_WAIT_MS if len(by_leader) == 1 else 100,
                                       min_bytes=1, max_bytes=50 << 20, isolation_level=int(read_committed), session_id=0,
                                       session_epoch=-1, forgotten_topics_data=[], rack_id="", topics=[
                                           FetchRequest.FetchTopic(topic=args.topic, partitions=[
                                               FetchRequest.FetchPartition(
                                                   partition=p, current_leader_epoch=-1, fetch_offset=positions[(t, p)],
                                                   last_fetched_epoch=-1, log_start_offset=-1,
                                                   partition_max_bytes=_PARTITION_MAX_BYTES)
                                               for t, p in tps])])
                response = client.send(request, node=leader, cap=12, floor=4)
                if response.error_code:
                    raise KafkaApiError(response.error_code, f"cannot fetch from broker {leader}")
                for topic in response.responses:
                    for data in topic.partitions:
                        tp = (args.topic, data.partition_index)
                        if data.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                            positions[tp] = list_offsets(client, [tp], EARLIEST)[tp]
                            continue
                        if data.error_code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE,
                                               ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.FENCED_LEADER_EPOCH):
                            leaders = client.leaders([args.topic])
                            continue
                        if data.error_code:
                            raise KafkaApiError(data.error_code, f"cannot fetch {tp[0]}:{tp[1]}")
                        aborted = data.aborted_transactions if read_committed else None
                        for record, ts_type in _records(data.records, positions[tp], aborted):
                            if spec.end_timestamp is not None and record.timestamp >= spec.end_timestamp:
                                done.add(tp)
                                break
                            out.write(_json_line(tp[0], tp[1], record, ts_type, leader) if json_out
                                      else formatter.format(tp[0], tp[1], record))
                            positions[tp] = record.offset + 1
                            consumed += 1
                            if progress:
                                progress.advance()
                            if args.count is not None and consumed >= args.count:
                                break
                        else:
                            positions[tp] = max(positions[tp], _next_offset(data.records, positions[tp]))
                            end = data.last_stable_offset if read_committed and data.last_stable_offset >= 0 \
                                else data.high_watermark
                            if args.exit_at_end and positions[tp] >= end:
                                done.add(tp)
                        if args.count is not None and consumed >= args.count:
                            break
                out.flush()
    except KeyboardInterrupt:
        pass
    finally:
        if progress:
            progress.close()
    if member is not None:
        member.commit(positions)
        member.leave()
    return 0


def _assigned(topic: str, assignment: dict[str, list[int]]) -> list[tuple[str, int]]:
    return [(topic, p) for p in sorted(assignment.get(topic, []))]


def _records(records, position: int, aborted_transactions=None):
    """(record, timestamp type) of the whole v2 batches in a fetch response, from `position` on; control
    batches are skipped and a truncated last batch is left for the next fetch. With the response's
    aborted transactions (read_committed), the batches of an aborted transaction are skipped as Kafka's
    consumer does: a producer is aborting from its transaction's first offset until its next marker."""
    if not records:
        return
    pending = sorted((t.first_offset, t.producer_id) for t in aborted_transactions or ())
    aborting: set[int] = set()
    pos, end = 0, len(records)
    while pos + HEADER_SIZE <= end:
        try:
            header = read_batch_header(records, pos)
        except CorruptRecordError as exc:
            raise CliError(f"cannot read the records at byte {pos}: {exc} (message format v0/v1 is not "
                           f"supported)") from None
        if pos + header.size > end:
            return
        while pending and pending[0][0] <= header.last_offset:
            aborting.add(pending.pop(0)[1])
        if header.is_control:
            aborting.discard(header.producer_id)
        elif header.is_transactional and header.producer_id in aborting:
            pass
        elif header.next_offset > position:
            for record in iter_records(records, header):
                if record.offset >= position:
                    yield record, header.timestamp_type
        pos += header.size


def _next_offset(records, position: int) -> int:
    """The offset after the last whole batch (control batches and compacted-away records count too)."""
    if not records:
        return position
    pos, end, last = 0, len(records), position
    while pos + HEADER_SIZE <= end:
        try:
            header = read_batch_header(records, pos)
        except CorruptRecordError:
            return last
        if pos + header.size > end:
            break
        last = max(last, header.next_offset)
        pos += header.size
    return last

