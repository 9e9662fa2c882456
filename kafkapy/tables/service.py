"""The tables service of one broker: for each partition it leads whose topic has kafkapy.iceberg.mode
set, a task reads the committed log (read_committed, bounded bytes per read) and hands the raw batches
to the tables worker process (worker.py), which translates, buffers and commits them; a committer
task asks the worker to commit every kafkapy.iceberg.commit.interval.ms, or early once the buffered
rows reach kafkapy.iceberg.translation.max.bytes.

Nothing per record runs here, on the broker's event loop: a read is a file slice's bytes and a few
header fields. A failing catalog or warehouse (full disk, unreachable REST catalog) puts the topic in
the stopped state (metrics, `kafkapy tables describe`, one log line per change); reads pause, and the
commit and the partitions' starts are retried with backoff. The log keeps the records meanwhile, so
nothing is lost: the table resumes from its committed offsets.
"""
from __future__ import annotations

import asyncio
import logging
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .catalog import CatalogSettings

if TYPE_CHECKING:
    from .host import TablesHost

log = logging.getLogger(__name__)

MODE_CONFIG = "kafkapy.iceberg.mode"
READ_MAX_BYTES = 1 << 20          # bytes of batches per read handed to the worker
GATHER_S = 0.1                    # after a short read, let more records arrive before the next one
IDLE_WAIT_S = 1.0                 # an idle partition waits for an append this long (woken earlier by one)
BACKOFF_S = (0.5, 1, 2, 5, 10, 30)
STOP_COMMIT_S = 5.0


def topic_mode(metadata, topic: str) -> str:
    configs = metadata.topic_configs(topic) or {}
    return (configs.get(MODE_CONFIG) or "disabled").strip()


@dataclass(slots=True)
class PartitionState:
    """What the service knows of one partition's translation (shown by metrics and the CLI)."""

    topic: str
    partition: int
    mode: str
    task: asyncio.Task | None = None
    position: int = -1          # next offset to read
    committed: int | None = None  # the table's next offset for the partition (None: nothing committed)
    error: str | None = None


@dataclass(slots=True)
class TopicState:
    error: str | None = None
    since: float = 0.0
    failures: int = 0
    snapshot: dict | None = None  # the table's current snapshot as last seen here: {"id", "timestamp_ms"}


@dataclass
class TablesCounters:
    commits: int = 0
    rows: int = 0
    dead_letters: int = 0
    translated_bytes: int = 0
    errors: dict = field(default_factory=dict)


def _without_password(uri: str) -> str:
    """A catalog URI to show: a password in it (postgresql://user:secret@host) replaced by ***."""
    import re

    return re.sub(r"//([^:/@]+):[^@/]*@", r"//\1:***@", uri)


class WorkerUnavailable(Exception):
    pass


class TablesService:
    """The per-broker service: partition readers, the committer and the worker process."""

    def __init__(self, broker: TablesHost):
        """Built by the composition root (node.py) with the broker as `TablesHost` (host.py): what
        this service and its registry schemas read of it."""
        self.broker = broker
        get = broker.config.get
        self.settings = CatalogSettings.from_config(get, broker.log_dirs)
        self.interval_s = get("kafkapy.iceberg.commit.interval.ms") / 1000
        self.max_bytes = get("kafkapy.iceberg.translation.max.bytes")
        self.partitions: dict[tuple[str, int], PartitionState] = {}
        self.topics: dict[str, TopicState] = {}
        self.counters = TablesCounters()
        self._pool = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._commit_now = asyncio.Event()
        self._committer: asyncio.Task | None = None
        self._buffered = 0
        self._resumed = asyncio.Event()  # set while reads may go on (the buffer is under its bound)
        self._resumed.set()
        self._closed = False

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.broker.replicas.leadership_listeners.append(self._leadership_changed)
        self.broker.metadata.add_listener(self._metadata_changed)
        self._committer = loop.create_task(self._commit_loop())
        self.resync()
        log.info("tables: catalog %s, warehouse %s, commit interval %.0f ms", self.settings.uri,
                 self.settings.warehouse, self.interval_s * 1000)

    async def stop(self) -> None:
        """Stop reading, commit what is buffered (a clean shutdown leaves no lag to catch up; bounded
        at STOP_COMMIT_S), then stop the worker."""
        self._closed = True
        tasks = [s.task for s in self.partitions.values() if s.task is not None]
        if self._committer is not None:
            tasks.append(self._committer)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        from .registry_schemas import stop_own_registry

        await stop_own_registry(self.broker)
        if self._pool is None:
            return
        try:
            await asyncio.wait_for(self._commit_all(), STOP_COMMIT_S)
        except Exception as exc:  # the next start resumes from the table's committed offsets
            log.warning("tables: the last commit before shutdown did not finish: %s", exc or type(exc).__name__)
        processes = list((getattr(self._pool, "_processes", None) or {}).values())
        self._pool.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            process.terminate()
        self._pool = None

    # -- which partitions ------------------------------------------------------------------------
    def _leadership_changed(self, topic: str, partition: int, is_leader: bool, leader_epoch: int) -> None:
        if self._loop is not None and not self._closed:
            self._loop.call_soon_threadsafe(self.resync_topic, topic)

    def _metadata_changed(self, change) -> None:
        topic = getattr(getattr(change, "topic", None), "name", None)
        if topic is not None and self._loop is not None and not self._closed:
            self._loop.call_soon_threadsafe(self.resync_topic, topic)

    def resync(self) -> None:
        topics = {t for t, _ in self.partitions}
        topics.update(p.topic for p in self.broker.replicas.partitions())
        for topic in topics:
            self.resync_topic(topic)

    def resync_topic(self, topic: str) -> None:
        """Start readers for the partitions of `topic` led here if its mode is on; stop the others."""
        if self._closed:
            return
        mode = topic_mode(self.broker.metadata, topic) if self.broker.metadata.get_topic(topic) else "disabled"
        led = set()
        if mode != "disabled":
            for part in self.broker.replicas.partitions():
                if part.topic == topic and part.is_leader:
                    led.add(part.partition)
        for (name, index), state in list(self.partitions.items()):
            if name == topic and (index not in led or state.mode != mode):
                self._stop_partition(state)
        for index in led:
            if (topic, index) not in self.partitions:
                state = PartitionState(topic, index, mode)
                self.partitions[(topic, index)] = state
                state.task = self._loop.create_task(self._run_partition(state))
        if not led:
            self.topics.pop(topic, None)

    def _stop_partition(self, state: PartitionState) -> None:
        self.partitions.pop((state.topic, state.partition), None)
        if state.task is not None:
            state.task.cancel()
        if self._pool is not None:
            self._loop.create_task(self._quietly(self._call("close_partition", state.topic, state.partition)))

    @staticmethod
    async def _quietly(coro) -> None:
        try:
            await coro
        except Exception as exc:  # the worker may be gone: its buffers are then gone too
            log.debug("tables: %s", exc)

    # -- the worker process ----------------------------------------------------------------------
    def _worker(self):
        if self._pool is None:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            from . import worker

            self._pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                                             initializer=worker.init, initargs=(self.settings, os.getpid()))
        return self._pool

    async def _call(self, name: str, *args):
        from concurrent.futures.process import BrokenProcessPool

        from . import worker

        pool = self._worker()
        try:
            return await asyncio.wrap_future(pool.submit(getattr(worker, name), *args))
        except BrokenProcessPool:
            # the worker died (killed, out of memory): its buffers are lost, so every partition
            # starts again from its table's committed offsets
            if self._pool is pool:
                self._pool = None
                pool.shutdown(wait=False, cancel_futures=True)
                for state in list(self.partitions.values()):
                    if state.task is not None and state.task is not asyncio.current_task():
                        state.task.cancel()
                        state.task = self._loop.create_task(self._run_partition(state))
            raise WorkerUnavailable("the tables worker process exited") from None

    # -- reading a partition -----------------------------------------------------------------------
    async def _run_partition(self, state: PartitionState) -> None:
        failures = 0
        while not self._closed:
            try:
                await self._translate(state)
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failures += 1
                message = f"{type(exc).__name__}: {exc}"
                self._set_error(state.topic, message)
                state.error = message
                await asyncio.sleep(BACKOFF_S[min(failures, len(BACKOFF_S)) - 1])

    async def _translate(self, state: PartitionState) -> None:
        replicas = self.broker.replicas
        part = replicas.partition(state.topic, state.partition)
        if part is None or not part.is_leader:
            return
        opened = await self._call("open_partition", state.topic, state.partition, state.mode,
                                  part.log.log_start_offset)
        state.position, state.committed, state.error = opened["position"], opened["committed"], None
        self._set_error(state.topic, None)
        self._set_snapshot(state.topic, opened.get("snapshot"))
        key = (state.topic, state.partition)
        while True:
            await self._resumed.wait()
            data = replicas.read_for_consumer(state.topic, state.partition, state.position, -1, READ_MAX_BYTES,
                                              True, True)
            if data.error_code:
                from ..protocol.errors import ErrorCode

                if data.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    # retention removed records the table never got (the broker was down, or the
                    # table was stopped longer than retention.ms): continue at the log start
                    log.warning("tables: %s-%d: offset %d is out of range; continuing at %d", state.topic,
                                state.partition, state.position, part.log.log_start_offset)
                    await self._commit_topic(state.topic)  # what is buffered first: the log no longer has it
                    opened = await self._call("open_partition", state.topic, state.partition, state.mode,
                                              part.log.log_start_offset)
                    state.position, state.committed = opened["position"], opened["committed"]
                    continue
                return  # no longer the leader: the leadership listener stops or restarts this
            records = data.records
            if not records:
                await self.broker.purgatory.wait_any([key], IDLE_WAIT_S)
                await asyncio.sleep(GATHER_S)
                continue
            raw = records.tobytes() if hasattr(records, "tobytes") else bytes(records)
            end = getattr(records, "next_offset", -1)
            if end < 0:
                from .worker import next_offset

                end = next_offset(raw)
            aborted = [(a.producer_id, a.first_offset) for a in data.aborted_transactions or ()]
            answer = await self._call("add", state.topic, state.partition, state.position, end, raw, aborted)
            if "schemas" in answer:
                await self._call("add_schemas", await self._lookup_schemas(answer["schemas"]))
                continue
            if "position" in answer:
                if answer["position"] is None:
                    return
                state.position = answer["position"]
                continue
            self.counters.translated_bytes += len(raw)
            state.position = end
            self._buffered = answer["buffered"]
            if self._buffered >= self.max_bytes:
                self._resumed.clear()
                self._commit_now.set()
            if len(raw) < READ_MAX_BYTES // 2:
                await asyncio.sleep(GATHER_S)

    async def _lookup_schemas(self, ids: list[int]) -> dict:
        """Registry schemas for the worker (value_schema_id_prefix mode): id -> SchemaText, None when
        the broker's registry does not know the id."""
        from .registry_schemas import lookup_schemas

        return await lookup_schemas(self.broker, ids)

    # -- committing --------------------------------------------------------------------------------
    async def _commit_loop(self) -> None:
        failures = 0
        while True:
            try:
                await asyncio.wait_for(self._commit_now.wait(), self.interval_s if not failures else
                                       BACKOFF_S[min(failures, len(BACKOFF_S)) - 1])
            except asyncio.TimeoutError:
                pass
            self._commit_now.clear()
            if self._pool is None:
                continue
            ok = await self._commit_all()
            failures = 0 if ok else failures + 1
            if ok:
                self._buffered = 0
                self._resumed.set()

    async def _commit_all(self) -> bool:
        ok = True
        for topic in sorted({t for t, _ in self.partitions}):
            try:
                await self._commit_topic(topic)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                ok = False
                self._set_error(topic, f"commit failed: {type(exc).__name__}: {exc}")
        return ok

    async def _commit_topic(self, topic: str) -> None:
        if not await self._call("pending", topic):
            return
        started = time.monotonic()
        answer = await self._call("commit", topic)
        if not answer["partitions"]:
            return
        self.counters.commits += 1
        self.counters.rows += answer["rows"]
        self.counters.dead_letters += answer["dead"]
        for partition, outcome in answer["partitions"].items():
            state = self.partitions.get((topic, partition))
            if state is not None:
                state.committed = outcome["committed"]
                state.error = None
        self._set_error(topic, None)
        self._set_snapshot(topic, answer.get("snapshot"))
        log.debug("tables: committed %d rows of %s in %.3f s", answer["rows"], topic, time.monotonic() - started)

    def _set_snapshot(self, topic: str, snapshot: dict | None) -> None:
        if snapshot is not None:
            state = self.topics.setdefault(topic, TopicState())
            if state.snapshot is None or snapshot["timestamp_ms"] >= state.snapshot["timestamp_ms"]:
                state.snapshot = snapshot

    def _set_error(self, topic: str, message: str | None) -> None:
        """Record a topic's state; log a line when it changes (stopped with the message, or running)."""
        first = topic not in self.topics
        state = self.topics.setdefault(topic, TopicState())
        if message == state.error:
            if first:
                self._write_status()
            return
        if message is None:
            log.info("tables: %s: translation running again after %.1f s stopped", topic,
                     time.monotonic() - state.since)
        elif state.error is None:
            log.error("tables: %s: translation stopped, retrying: %s", topic, message)
            state.since = time.monotonic()
        else:
            log.error("tables: %s: translation still stopped: %s", topic, message)
        state.error = message
        self._write_status()

    def _write_status(self) -> None:
        """The topics' states for `kafkapy tables describe`: <first log dir>/iceberg/broker-<id>.status.json."""
        import json

        path = self.status_path
        status = {"broker": self.broker.node_id, "updated_ms": int(time.time() * 1000), "topics": {
            topic: {"state": "running" if s.error is None else "stopped", "error": s.error}
            for topic, s in sorted(self.topics.items())}}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            temporary = path.with_suffix(".tmp")
            temporary.write_text(json.dumps(status, indent=1))
            os.replace(temporary, path)
        except OSError as exc:
            log.warning("tables: cannot write %s: %s", path, exc)

    @property
    def status_path(self):
        from pathlib import Path

        return Path(self.broker.log_dirs[0]) / "iceberg" / f"broker-{self.broker.node_id}.status.json"

    # -- what metrics, the CLI and the console show ------------------------------------------------
    def lag(self, state: PartitionState) -> int | None:
        part = self.broker.replicas.partition(state.topic, state.partition)
        if part is None or part.log.is_offline:
            return None
        base = state.committed if state.committed is not None else part.log.log_start_offset
        return max(0, part.log.last_stable_offset - base)

    def describe_topic(self, topic: str) -> dict | None:
        """A topic's table as this broker sees it (the console's topic page): mode, tables, the
        current snapshot, the state, and per partition led here the committed next offset, the
        read position, the lag and the last error. None when no partition of it is translated here."""
        parts = sorted((s for (t, _), s in self.partitions.items() if t == topic), key=lambda s: s.partition)
        if not parts:
            return None
        state = self.topics.get(topic) or TopicState()
        return {"mode": parts[0].mode, "table": f"kafka.{topic}", "dead_letters": f"kafka.{topic}~dlq",
                "snapshot": state.snapshot, "state": "running" if state.error is None else "stopped",
                "error": state.error, "catalog": _without_password(self.settings.uri), "warehouse": self.settings.warehouse,
                "commit_interval_ms": int(self.interval_s * 1000),
                "partitions": [{"partition": s.partition, "committed": s.committed, "position": s.position,
                                "lag": self.lag(s), "error": s.error} for s in parts]}

    def metric_families(self) -> list:
        from .metrics import tables_families

        return tables_families(self)
