"""The tables worker: the process that turns a topic's log batches into Iceberg rows and commits them.

The broker process only reads raw committed batches from its logs and hands them here (service.py);
everything per record happens in this process, so that it never holds the broker's GIL: decoding the
batches (kafkapy/protocol), dropping aborted transactions and control batches, translating to Arrow
rows (values.py), buffering them per partition, and committing them through pyiceberg.

The functions below are called one at a time (a single-process pool): the module's globals are the
worker's state. Losing the process loses only uncommitted buffers; the broker then reopens every
partition at its table's committed offsets.

Exactly once (docs/tables.md): every commit of a table writes the snapshot property
`kafkapy.next-offsets`, {"<partition>": <next offset covered>}, for every partition ever committed. A
partition resumes at the main table's next offset. A commit of partition P's buffered range
[start, end) is conditional on the table's next offset n for P (absent: `start`): n < start is a gap
(another leader's view) and n > end is all covered already, both drop the buffer and move the reader
to n; otherwise the rows from n on are appended and P's next offset becomes `end`. pyiceberg's
optimistic concurrency (CommitFailedException) is retried with a fresh table. The dead-letter table
is committed before the main table and appends only rows at or above its own next offset, so a crash
between the two commits neither loses nor repeats a dead letter.
"""
from __future__ import annotations

import json
import logging
import os
import struct
import threading
import time
from dataclasses import dataclass, field

from ..protocol.control_records import ControlRecordType, control_record_type
from ..protocol.legacy_records import LOG_OVERHEAD, iter_legacy_records
from ..protocol.records import read_batch_header, read_magic, iter_records
from .catalog import NEXT_OFFSETS, CatalogSettings, dead_letter_table, main_table, next_offsets, open_catalog

log = logging.getLogger("kafkapy.tables.worker")

COMMIT_ATTEMPTS = 10


@dataclass(slots=True)
class _Buffer:
    """One partition's translated, uncommitted rows covering log offsets [start, end)."""

    mode: str
    start: int
    end: int
    rows: list = field(default_factory=list)
    dead: list = field(default_factory=list)
    nbytes: int = 0
    # the table's offset when the log started above it (retention): the one gap a commit accepts
    gap_from: int | None = None


_settings: CatalogSettings | None = None
_catalog = None
_buffers: dict[tuple[str, int], _Buffer] = {}
_schemas: dict[int, object] = {}       # registry schema id -> SchemaText (None: unknown to the registry)
_translators: dict[str, object] = {}   # topic -> ValueTranslator (value_schema_id_prefix mode)
_pending_schemas: dict[str, object] = {}  # topic -> the table's schema evolved by its buffered rows
_unknown_since: dict[int, float] = {}  # ids the registry did not know: asked again after UNKNOWN_RETRY_S
UNKNOWN_RETRY_S = 30.0


def init(settings: CatalogSettings, parent_pid: int) -> None:
    """The pool's initializer: remember the settings, and exit once the broker process is gone (a
    SIGKILLed broker cannot stop its worker)."""
    global _settings
    _settings = settings
    # the broker's log format (kafkapy/cli.py), on the stderr the worker shares with it
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s] %(levelname)s %(message)s (%(name)s)")

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent_pid:
                os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _catalog_now():
    global _catalog
    if _catalog is None:
        _catalog = open_catalog(_settings)
    return _catalog


def _reset_catalog() -> None:
    """Forget the catalog after an error: the next call opens it again (a REST session, a SQLite file)."""
    global _catalog
    _catalog = None


# pyiceberg (0.10+) retries a failed append by rebasing it on the newer snapshot, keeping the snapshot
# properties computed from the old one: that would write a stale kafkapy.next-offsets map. The tables
# are made with no pyiceberg retries; the worker retries itself, re-reading the map.
NO_RETRIES = {"commit.retry.num-retries": "0"}


def _load(identifier):
    from pyiceberg.exceptions import NoSuchTableError

    try:
        table = _catalog_now().load_table(identifier)
    except NoSuchTableError:
        return None
    if table.properties.get("commit.retry.num-retries") != "0":
        with table.transaction() as tx:  # a table made by someone else: no rebased commits either
            tx.set_properties(NO_RETRIES)
        table = _catalog_now().load_table(identifier)
    return table


def _create(identifier, schema):
    catalog = _catalog_now()
    catalog.create_namespace_if_not_exists(identifier[0])
    return catalog.create_table_if_not_exists(identifier, schema=schema, properties=NO_RETRIES)


def _main_schema(mode: str):
    import pyarrow as pa

    from .values import RESERVED_COLUMN, kafka_struct_type

    fields = [pa.field(RESERVED_COLUMN, kafka_struct_type(), nullable=False)]
    if mode == "key_value":
        fields.append(pa.field("value", pa.binary()))
    return pa.schema(fields)


# -- the calls the broker makes ---------------------------------------------------------------------

def open_partition(topic: str, partition: int, mode: str, log_start_offset: int) -> dict:
    """Start (or restart) translating a partition led by the broker: make sure the table exists and
    answer where to read from (the main table's next offset, else the log start offset) and what the
    table has committed."""
    try:
        table = _load(main_table(topic)) or _create(main_table(topic), _main_schema(mode))
    except Exception:
        _reset_catalog()
        raise
    committed = next_offsets(table).get(partition)
    position = committed if committed is not None else log_start_offset
    if committed is not None and committed < log_start_offset:
        # retention deleted records the table never got: they are gone from the log too
        log.warning("%s-%d: the table's next offset %d is below the log start offset %d; continuing there",
                    topic, partition, committed, log_start_offset)
        position = log_start_offset
    _buffers[(topic, partition)] = _Buffer(mode, position, position,
                                           gap_from=committed if committed is not None and committed < position else None)
    return {"position": position, "committed": committed, "snapshot": snapshot_info(table)}


def snapshot_info(table) -> dict | None:
    """The table's current snapshot as the console shows it: {"id", "timestamp_ms"} (None: none yet)."""
    snapshot = table.current_snapshot() if table is not None else None
    if snapshot is None:
        return None
    return {"id": snapshot.snapshot_id, "timestamp_ms": snapshot.timestamp_ms}


def close_partition(topic: str, partition: int) -> None:
    """The broker no longer leads the partition (or its table was turned off): drop its buffer."""
    _buffers.pop((topic, partition), None)


def add_schemas(schemas: dict) -> None:
    """Registry schemas the broker looked up for `add` (id -> SchemaText, None: unknown)."""
    _schemas.update(schemas)
    now = time.monotonic()
    for schema_id, text in schemas.items():
        if text is None:
            _unknown_since[schema_id] = now
    for translator in _translators.values():
        getattr(translator, "_decoders", {}).clear()  # an unknown id may be known now


def add(topic: str, partition: int, start: int, end: int, data: bytes, aborted: list[tuple[int, int]]) -> dict:
    """Translate one read of committed batches covering [start, end) and buffer the rows.

    Answers {"position": p} when the buffer is not at `start` (a commit moved it: read from p),
    {"schemas": [ids]} when values name registry schemas not known here yet (call add_schemas and
    again), else {"buffered": total bytes buffered, "records": n}."""
    buffer = _buffers.get((topic, partition))
    if buffer is None:
        return {"position": None}
    if start != buffer.end:
        return {"position": buffer.end}
    records = decode_committed(data, aborted, partition, start)
    if buffer.mode == "value_schema_id_prefix":
        now = time.monotonic()
        missing = sorted({sid for sid in _schema_ids(records.values) if sid not in _schemas or (
            _schemas[sid] is None and now - _unknown_since.get(sid, now) > UNKNOWN_RETRY_S)})
        if missing:
            return {"schemas": missing}
        translator = _translators.get(topic)
        if translator is None:
            from .values import ValueTranslator

            translator = _translators[topic] = ValueTranslator(_schemas.get)
        table = _load(main_table(topic))
        translated = translator.translate(records, _table_fields(topic, table))
        rows, dead = translated.rows, translated.dead_letters
        if rows.num_rows and table is not None:
            rows, dead = _fit_table(topic, table, records, rows, dead)
    else:
        from .values import key_value_rows

        rows, dead = key_value_rows(records), None
    if rows.num_rows:
        buffer.rows.append(rows)
        buffer.nbytes += rows.nbytes
    if dead is not None and dead.num_rows:
        buffer.dead.append(dead)
        buffer.nbytes += dead.nbytes
    buffer.end = end
    return {"buffered": buffered_bytes(), "records": len(records.offsets), "dead": 0 if dead is None else dead.num_rows}


def _table_fields(topic: str, table) -> list:
    """The value columns the table has (with the rows buffered for it), to seed the translator's merge."""
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    from .values import table_value_fields

    schema = _pending_schemas.get(topic) or (table.schema() if table is not None else None)
    if schema is None:
        return []
    return table_value_fields(schema_to_pyarrow(schema, include_field_ids=False))


def _fit_table(topic: str, table, records, rows, dead):
    """Rows whose columns the table's schema cannot take (a type change pyiceberg's union_by_name
    refuses, against the table and the rows buffered before them) become dead letters with the
    reason; a commit then never fails on them."""
    import pyarrow as pa

    from pyiceberg.table.update.schema import UpdateSchema

    from .values import _dead_letters

    try:
        update = UpdateSchema(table.transaction(), schema=_pending_schemas.get(topic) or table.schema())
        update.union_by_name(rows.schema)
        _pending_schemas[topic] = update._apply()
        return rows, dead
    except Exception as exc:
        reason = f"the table's schema cannot take this value's columns: {type(exc).__name__}: {exc}"
    offsets = set(_offsets_of(rows).to_pylist())
    refused = _dead_letters(records, {i: reason for i, o in enumerate(records.offsets) if o in offsets})
    log.warning("table %s.%s: %d records become dead letters: %s", *main_table(topic), refused.num_rows, reason)
    return rows.slice(0, 0), refused if dead is None or not dead.num_rows else pa.concat_tables([dead, refused])


def buffered_bytes() -> int:
    return sum(b.nbytes for b in _buffers.values())


def pending(topic: str) -> bool:
    return any(t == topic and b.end > b.start for (t, _), b in _buffers.items())


def commit(topic: str) -> dict:
    """Commit the buffered rows of every partition of `topic` (dead letters first, then the rows).

    Answers {"partitions": {partition: {"committed": next offset, "moved": bool}}, "rows": n,
    "dead": n, "snapshot": the table's current snapshot (snapshot_info)} where `moved` says the buffer
    was dropped and the reader must continue at `committed`."""
    parts = {p: b for (t, p), b in _buffers.items() if t == topic and b.end > b.start}
    if not parts:
        return {"partitions": {}, "rows": 0, "dead": 0}
    try:
        dead = _commit_dead_letters(topic, parts)
        result, rows = _commit_rows(topic, parts)
    except Exception:
        _reset_catalog()
        raise
    if not any(b.rows for (t, _), b in _buffers.items() if t == topic):
        _pending_schemas.pop(topic, None)
    try:
        snapshot = snapshot_info(_load(main_table(topic)))
    except Exception as exc:  # shown only; the commit itself is done
        log.warning("table %s.%s: cannot read its snapshot after a commit: %s", *main_table(topic), exc)
        snapshot = None
    return {"partitions": result, "rows": rows, "dead": dead, "snapshot": snapshot}


def _schema_ids(values) -> set[int]:
    ids = set()
    for value in values:
        if value is not None and len(value) >= 5 and value[0] == 0:
            ids.add(struct.unpack_from(">i", value, 1)[0])
    return ids


# -- decoding ---------------------------------------------------------------------------------------

def _entries(data: bytes):
    """The log entries of `data` in order: ("batch", header) for a v2 record batch, ("legacy",
    messages) for a message-format v0/v1 message (a compressed wrapper opened into its inner
    messages). kafkapy's log stores v2 batches only (Produce v0-v2 message sets are converted on
    append, like Kafka's LogValidator), but a log written by an older broker may hold v0/v1 messages:
    those are still records and become rows."""
    view = memoryview(data)
    pos, end = 0, len(data)
    while pos < end:
        if read_magic(view, pos) >= 2:
            header = read_batch_header(view, pos)
            if pos + header.size > end:
                raise ValueError(f"record batch at byte {pos} runs past the end of the read")
            yield "batch", header
            pos += header.size
        else:
            if end - pos < LOG_OVERHEAD:
                raise ValueError(f"legacy message truncated at byte {pos}")
            size = struct.unpack_from(">i", view, pos + 8)[0]
            stop = pos + LOG_OVERHEAD + size
            yield "legacy", list(iter_legacy_records(bytes(view[pos:stop])))
            pos = stop


def next_offset(data: bytes) -> int:
    """The offset after the last record of `data` (v2 batches and v0/v1 messages alike)."""
    last = -1
    for kind, entry in _entries(data):
        last = entry.next_offset if kind == "batch" else max([last + 1] + [m.offset + 1 for m in entry])
    return last


def decode_committed(data: bytes, aborted: list[tuple[int, int]], partition: int, start: int):
    """The records of a read_committed read, as a consumer sees them: control batches and batches of
    aborted transactions left out (Kafka's Fetcher: a producer's batches are aborted from the first
    offset of its aborted transaction until its ABORT marker), records below `start` skipped.
    Message format v0/v1 messages (never transactional, no headers; v0 has no timestamp: -1, Kafka's
    NO_TIMESTAMP) are records like any other."""
    from .values import Records

    records = Records(partition, [], [], [], [], [])
    pending_aborts = sorted(aborted, key=lambda a: a[1])
    aborting: set[int] = set()
    i = 0
    for kind, header in _entries(data):
        if kind == "legacy":
            for message in header:
                if message.offset < start:
                    continue
                records.offsets.append(message.offset)
                records.timestamps_ms.append(message.timestamp)
                records.keys.append(message.key)
                records.values.append(message.value)
                records.headers.append(None)
            continue
        while i < len(pending_aborts) and pending_aborts[i][1] <= header.last_offset:
            aborting.add(pending_aborts[i][0])
            i += 1
        if header.is_control:
            if header.producer_id in aborting:
                for record in iter_records(data, header):
                    if control_record_type(record.key) == ControlRecordType.ABORT:
                        aborting.discard(header.producer_id)
            continue
        if header.next_offset <= start or (header.is_transactional and header.producer_id in aborting):
            continue
        for record in iter_records(data, header):
            if record.offset < start:
                continue
            records.offsets.append(record.offset)
            records.timestamps_ms.append(record.timestamp)
            records.keys.append(record.key)
            records.values.append(record.value)
            records.headers.append(record.headers or None)
    return records


# -- committing -------------------------------------------------------------------------------------

def _offsets_of(table):
    import pyarrow.compute as pc

    return pc.struct_field(table.column("kafka"), "offset")


def _from(tables: list, first: int):
    """The rows of `tables` at offsets >= first, as one Arrow table (None if there are none)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kept = []
    for t in tables:
        if t.num_rows and pc.max(_offsets_of(t)).as_py() >= first:
            kept.append(t.filter(pc.greater_equal(_offsets_of(t), first)))
    kept = [t for t in kept if t.num_rows]
    if not kept:
        return None
    return pa.concat_tables(kept, promote_options="permissive") if len(kept) > 1 else kept[0]


def _append(table, rows, offsets: dict[int, int]) -> None:
    """One commit: evolve the schema to take `rows` if needed, append them, write the offsets map."""
    properties = {NEXT_OFFSETS: json.dumps({str(p): o for p, o in sorted(offsets.items())})}
    with table.transaction() as tx:
        if rows is not None:
            names = set(table.schema().column_names)
            if any(name not in names for name in rows.schema.names) or _needs_union(table, rows):
                with tx.update_schema() as update:
                    update.union_by_name(rows.schema)
            tx.append(rows, snapshot_properties=properties)
        else:
            tx.append(_empty_like(table), snapshot_properties=properties)


def _needs_union(table, rows) -> bool:
    """Whether `rows` has nested fields the table lacks (top-level names are checked by the caller)."""
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    current = schema_to_pyarrow(table.schema())
    for name in rows.schema.names:
        have = current.field(name).type if name in current.names else None
        if have is not None and not _type_covers(have, rows.schema.field(name).type):
            return True
    return False


def _type_covers(have, want) -> bool:
    import pyarrow as pa

    if pa.types.is_struct(want):
        if not pa.types.is_struct(have):
            return False
        names = {have.field(i).name: have.field(i).type for i in range(have.num_fields)}
        return all(want.field(i).name in names and _type_covers(names[want.field(i).name], want.field(i).type)
                   for i in range(want.num_fields))
    if pa.types.is_list(want) or pa.types.is_large_list(want):
        return (pa.types.is_list(have) or pa.types.is_large_list(have)) and _type_covers(
            have.value_type, want.value_type)
    if pa.types.is_map(want):
        return pa.types.is_map(have) and _type_covers(have.item_type, want.item_type)
    return True


def _empty_like(table):
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    return schema_to_pyarrow(table.schema(), include_field_ids=False).empty_table()


def _commit_rows(topic: str, parts: dict[int, _Buffer]) -> tuple[dict, int]:
    from pyiceberg.exceptions import CommitFailedException

    identifier = main_table(topic)
    for attempt in range(COMMIT_ATTEMPTS):
        table = _load(identifier)
        if table is None:
            table = _create(identifier, _main_schema(next(iter(parts.values())).mode))
        offsets = next_offsets(table)
        result: dict[int, dict] = {}
        chunks = []
        advanced = dict(offsets)
        for partition, buffer in parts.items():
            n = offsets.get(partition, buffer.start)
            if buffer.gap_from is not None and n == buffer.gap_from:
                n = buffer.start
            if n < buffer.start or n > buffer.end:
                result[partition] = {"committed": n, "moved": True}
                continue
            chunk = _from(buffer.rows, n)
            if chunk is not None:
                chunks.append(chunk)
            advanced[partition] = buffer.end
            result[partition] = {"committed": buffer.end, "moved": False}
        rows = None
        if chunks:
            import pyarrow as pa

            rows = pa.concat_tables(chunks, promote_options="permissive") if len(chunks) > 1 else chunks[0]
        if advanced != offsets:
            try:
                _append(table, rows, advanced)
            except CommitFailedException as exc:
                log.info("table %s.%s changed under the commit (%s): again (attempt %d)", *identifier, exc,
                         attempt + 1)
                continue
        for partition, outcome in result.items():
            buffer = parts[partition]
            if outcome["moved"]:
                log.info("%s-%d: the table is at offset %d, not in the buffered [%d, %d) (another leader "
                         "committed): reading from there", topic, partition, outcome["committed"],
                         buffer.start, buffer.end)
            buffer.start = buffer.end = outcome["committed"]
            buffer.gap_from = None
            buffer.rows.clear()
            buffer.dead.clear()
            buffer.nbytes = 0
        return result, 0 if rows is None else rows.num_rows
    raise RuntimeError(f"table {'.'.join(identifier)}: {COMMIT_ATTEMPTS} commits in a row met a concurrent commit")


def _commit_dead_letters(topic: str, parts: dict[int, _Buffer]) -> int:
    from pyiceberg.exceptions import CommitFailedException

    if not any(b.dead for b in parts.values()):
        return 0
    from .values import dead_letter_schema

    identifier = dead_letter_table(topic)
    for attempt in range(COMMIT_ATTEMPTS):
        table = _load(identifier) or _create(identifier, dead_letter_schema())
        offsets = next_offsets(table)
        chunks, advanced = [], dict(offsets)
        for partition, buffer in parts.items():
            if not buffer.dead:
                continue
            chunk = _from(buffer.dead, offsets.get(partition, buffer.start))
            if chunk is not None:
                chunks.append(chunk)
            advanced[partition] = max(buffer.end, offsets.get(partition, buffer.end))
        if not chunks:
            return 0
        import pyarrow as pa

        rows = pa.concat_tables(chunks) if len(chunks) > 1 else chunks[0]
        try:
            _append(table, rows, advanced)
        except CommitFailedException:
            log.info("table %s.%s changed under the commit: again (attempt %d)", *identifier, attempt + 1)
            continue
        return rows.num_rows
    raise RuntimeError(f"table {'.'.join(identifier)}: {COMMIT_ATTEMPTS} commits in a row met a concurrent commit")
