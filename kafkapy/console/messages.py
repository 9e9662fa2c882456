"""The message browser: records read from a partition log led here, decoded for display.

This is the one place the console decodes records, and it is bounded: at most `limit` records are
returned and a search scans at most MAX_SCAN_RECORDS records / MAX_SCAN_BYTES bytes per request
(the answer says where it stopped, so the page can continue from there). Reads go through
PartitionLog.read up to the high watermark, like a consumer's fetch; control batches (transaction
markers) are skipped as consumers skip them.
"""
from __future__ import annotations

import asyncio
import base64
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..log.errors import OffsetOutOfRangeError
from ..protocol.records import iter_batch_headers, iter_records
from .state import ConsoleError

if TYPE_CHECKING:
    from .source import ConsoleSource

__all__ = ["Page", "read_page", "read_page_async", "decode", "export_record", "MAX_LIMIT"]

MAX_LIMIT = 500
MAX_SCAN_RECORDS = 20_000
MAX_SCAN_BYTES = 32 * 1024 * 1024
READ_CHUNK_BYTES = 32 * 1024  # the loop waits for one chunk's decoding at most (bench/console)
FORMATS = ("auto", "text", "json", "hex")


@dataclass(slots=True)
class Page:
    """Records of one partition from `start` (after a search: those that match)."""

    start: int
    next_offset: int  # where to continue (live tail, next page, more search)
    log_start: int
    log_end: int
    records: list = field(default_factory=list)
    scanned: int = 0
    scan_limited: bool = False  # a search stopped at the scan bound before `limit` hits


def partition_log(broker: ConsoleSource, topic: str, partition: int):
    """The log of a partition led here, or ConsoleError naming the leader."""
    meta = broker.partitions.topic(topic)
    if meta is None:
        raise ConsoleError(404, f"unknown topic {topic!r} (UNKNOWN_TOPIC_OR_PARTITION)")
    if not 0 <= partition < meta.partition_count:
        raise ConsoleError(404, f"topic {topic!r} has no partition {partition} "
                                f"(it has {meta.partition_count}: 0-{meta.partition_count - 1})")
    leader = meta.partitions[partition].leader
    log = broker.partitions.get_log(topic, partition)
    if leader != broker.node_id or log is None:
        raise ConsoleError(409, f"{topic}-{partition} is led by broker {leader}, not this one "
                                f"({broker.node_id}): open that broker's console to read it",
                           link=_leader_console(broker, leader))
    if log.is_offline:
        raise ConsoleError(503, f"{topic}-{partition} is offline on this broker (KAFKA_STORAGE_ERROR)")
    return log


def _leader_console(broker: ConsoleSource, leader: int) -> str | None:
    """The leader's console, assuming it listens on the same port as ours (brokers usually share
    one configuration); the path is filled in by the server."""
    console = broker.console
    for info in broker.brokers_for(None):
        if info.node_id == leader and console is not None:
            return f"http://{info.host}:{console.port}"
    return None


def start_offset(log, offset: int | None = None, timestamp_ms: int | None = None,
                 from_end: int | None = None) -> int:
    """Where a page starts: an offset (clamped to the log), the first record at or after a time
    (the log end when none is), or `from_end` records before the end."""
    low, high = log.log_start_offset, log.high_watermark
    if timestamp_ms is not None:
        found = log.offset_for_timestamp(timestamp_ms)
        return high if found is None else min(max(found[0], low), high)
    if from_end is not None:
        return max(high - from_end, low)
    if offset is None:
        return low
    return min(max(offset, low), high)


def read_page(log, start: int, limit: int, search: str = "") -> Page:
    """Up to `limit` records from `start` (only those containing `search` in key, value, a
    header key or value, as UTF-8, case-insensitive), below the high watermark."""
    scan = _scan(log, start, limit, search)
    while True:
        try:
            next(scan)
        except StopIteration as done:
            return done.value


async def read_page_async(log, start: int, limit: int, search: str = "") -> Page:
    """read_page on the event loop, giving the loop back after every chunk read (READ_CHUNK_BYTES),
    so a long search delays the broker's requests by one chunk's decoding at a time."""
    scan = _scan(log, start, limit, search)
    while True:
        try:
            next(scan)
        except StopIteration as done:
            return done.value
        await asyncio.sleep(0)


def _scan(log, start: int, limit: int, search: str):
    """read_page as a generator that yields after each chunk; returns the Page."""
    limit = max(1, min(limit, MAX_LIMIT))
    needle = search.lower().encode() if search else b""
    high = log.high_watermark
    page = Page(start, start, log.log_start_offset, high)
    offset = start
    scanned_bytes = 0
    while offset < high and len(page.records) < limit:
        if needle and (page.scanned >= MAX_SCAN_RECORDS or scanned_bytes >= MAX_SCAN_BYTES):
            page.scan_limited = True
            break
        try:
            result = log.read(offset, READ_CHUNK_BYTES, max_offset=high)
            if not result.records:  # the high watermark is inside the batch: read it, show below it
                result = log.read(offset, READ_CHUNK_BYTES)
        except OffsetOutOfRangeError:
            if offset < log.log_start_offset:  # retention removed it meanwhile: go on from the start
                offset = page.start = log.log_start_offset
                continue
            break  # the log was truncated below `offset` (a new leader): the page ends here
        records = result.records
        try:
            data = records.tobytes() if hasattr(records, "tobytes") else bytes(records)
        except EOFError:  # the segment was truncated after the read (a new leader)
            break
        if not data:
            break
        scanned_bytes += len(data)
        last_next = offset
        for header in iter_batch_headers(data, validate=True):
            last_next = header.base_offset + header.last_offset_delta + 1
            if header.is_control or last_next <= offset:
                continue
            if header.base_offset >= high:
                break
            for record in iter_records(data, header):
                if record.offset < offset:
                    continue
                if record.offset >= high:
                    last_next = high
                    break
                if needle and page.scanned >= MAX_SCAN_RECORDS:
                    page.scan_limited = True
                    last_next = record.offset
                    break
                page.scanned += 1
                if not needle or _matches(record, needle):
                    page.records.append(record)
                    if len(page.records) >= limit:
                        last_next = record.offset + 1
                        break
                last_next = record.offset + 1
            if len(page.records) >= limit or page.scan_limited:
                break
        if page.scan_limited:
            offset = last_next
            break
        if last_next <= offset:  # nothing past `offset` in what was read: the log ends here
            break
        offset = last_next
        yield
    page.next_offset = min(offset, high)
    return page


def _matches(record, needle: bytes) -> bool:
    if record.key is not None and needle in record.key.lower():
        return True
    if record.value is not None and needle in record.value.lower():
        return True
    for key, value in record.headers:
        if needle in key.lower().encode() or (value is not None and needle in value.lower()):
            return True
    return False


def decode(data: bytes | None, fmt: str = "auto") -> tuple[str, str]:
    """(how it was decoded, text to show) for a key, value or header value."""
    if data is None:
        return "null", "null"
    if fmt == "hex":
        return "hex", data.hex(" ")
    if fmt in ("auto", "json"):
        try:
            return "json", json.dumps(json.loads(data), indent=2, ensure_ascii=False)
        except (ValueError, UnicodeDecodeError):
            if fmt == "json":
                return "hex", data.hex(" ")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return "hex", data.hex(" ")
    if fmt == "auto" and any(ord(c) < 32 and c not in "\t\r\n" for c in text):
        return "hex", data.hex(" ")
    return "text", text


def export_record(topic: str, partition: int, record) -> dict:
    """One record as the JSON export writes it: UTF-8 text where it is, else base64."""
    out = {"topic": topic, "partition": partition, "offset": record.offset, "timestamp": record.timestamp}
    for name, data in (("key", record.key), ("value", record.value)):
        out.update(_bytes_field(name, data))
    out["headers"] = [{"key": k, **_bytes_field("value", v)} for k, v in record.headers]
    return out


def _bytes_field(name: str, data: bytes | None) -> dict:
    if data is None:
        return {name: None}
    try:
        return {name: data.decode("utf-8")}
    except UnicodeDecodeError:
        return {name: None, f"{name}_base64": base64.b64encode(data).decode()}


def parse_format(text: str | None) -> str:
    fmt = (text or "auto").lower()
    if fmt not in FORMATS:
        raise ConsoleError(400, f"format must be one of {', '.join(FORMATS)}, not {text!r}")
    return fmt
