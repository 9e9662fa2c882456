"""Stateful property test: any sequence of appends, rolls, clean and unclean restarts,
retention, DeleteRecords, truncation and reads returns byte-identical batches with
monotonic offsets, compared against a plain list of the batches written."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kafkapy.log import LogManager, OffsetOutOfRangeError
from kafkapy.protocol.records import build_batch, iter_batch_headers, read_batch_header

from logtools import BASE_TS, small_config

TOPIC = "prop"


class LogMachine(RuleBasedStateMachine):
    """The model: every batch appended (bytes as stored, offsets assigned), in order."""

    def __init__(self):
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="kafkapy-log-prop-"))
        self.batches: list[tuple[int, int, bytes]] = []  # (base offset, last offset, bytes)
        self.timestamps: list[tuple[int, int]] = []  # (offset, timestamp) of every record
        self.log_start = 0
        self.next_offset = 0
        self.clock = BASE_TS
        self.manager = None

    @initialize(segment_bytes=st.integers(300, 3000), index_interval=st.integers(0, 400),
                index_bytes=st.sampled_from([24, 64, 4096]))
    def open_log(self, segment_bytes, index_interval, index_bytes):
        self.config = small_config(segment_bytes=segment_bytes, index_interval_bytes=index_interval,
                                   segment_index_bytes=index_bytes, retention_ms=-1)
        self.manager = LogManager([str(self.root)], self.config)
        self.manager.load()
        self.log = self.manager.create(TOPIC, 0, self.config)

    def teardown(self):
        if self.manager is not None:
            self.manager.close()
        shutil.rmtree(self.root, ignore_errors=True)

    # ------------------------------------------------------------------ helpers
    @property
    def end(self) -> int:
        return self.next_offset

    def visible(self, offset: int) -> bytes:
        """What a reader starting at `offset` must get: whole batches from the one holding it."""
        return b"".join(data for base, last, data in self.batches if last >= offset)

    def reopen(self, clean: bool) -> None:
        if clean:
            self.manager.close()
        else:
            self.manager.write_checkpoints()  # what the periodic checkpoint would have written
            for plog in self.manager.all_logs().values():
                plog.abandon()
            self.manager.flusher.stop()
        self.manager = LogManager([str(self.root)], self.config)
        self.manager.load()
        self.log = self.manager.get(TOPIC, 0)

    # ------------------------------------------------------------------ rules
    @rule(sizes=st.lists(st.tuples(st.integers(1, 4), st.integers(0, 150)), min_size=1, max_size=3),
          epoch=st.integers(0, 2), ts_jump=st.integers(0, 5000))
    def append(self, sizes, epoch, ts_jump):
        self.clock += ts_jump
        buf = bytearray()
        for i, (count, value_size) in enumerate(sizes):
            records = [(b"k", bytes([i % 256]) * value_size, (), self.clock + j) for j in range(count)]
            buf += build_batch(records, base_timestamp=self.clock)
        if len(buf) > self.config.segment_bytes:
            return
        epoch = max(epoch, self.log.leader_epochs.latest_epoch)
        result = self.log.append(buf, leader_epoch=epoch)
        assert result.base_offset == self.end
        for header in iter_batch_headers(buf):
            data = bytes(buf[header.position:header.position + header.size])
            self.batches.append((header.base_offset, header.last_offset, data))
            self.timestamps += [(header.base_offset + j, self.clock + j) for j in range(header.records_count)]
            self.next_offset = header.last_offset + 1
        assert result.last_offset == self.end - 1

    @rule()
    def roll(self):
        self.log.roll()

    @rule(clean=st.booleans())
    def restart(self, clean):
        self.reopen(clean)
        assert self.log.log_end_offset == self.end
        assert self.log.log_start_offset == self.log_start

    @rule(retention=st.integers(0, 3000))
    def retention_bytes(self, retention):
        self.log.update_config(small_config(segment_bytes=self.config.segment_bytes,
                                            index_interval_bytes=self.config.index_interval_bytes,
                                            segment_index_bytes=self.config.segment_index_bytes,
                                            retention_ms=-1, retention_bytes=retention))
        self.log.delete_old_segments()
        self.log.update_config(self.config)
        assert self.log.log_start_offset >= self.log_start
        self.log_start = self.log.log_start_offset
        assert self.log.log_end_offset == self.end

    @precondition(lambda self: self.batches)
    @rule(data=st.data())
    def delete_records(self, data):
        target = data.draw(st.integers(self.log_start, self.end))
        low = self.log.delete_records_before(target)
        self.log_start = max(self.log_start, target)
        assert low == self.log_start

    @precondition(lambda self: self.batches)
    @rule(data=st.data())
    def truncate(self, data):
        target = data.draw(st.integers(self.log_start, self.end))
        self.log.truncate_to(target)
        removed = [b for b in self.batches if b[1] >= target]
        if removed:
            # A batch holding the target goes whole: the log then ends at its base offset.
            self.next_offset = removed[0][0]
        self.batches = [b for b in self.batches if b[1] < target]
        self.timestamps = [t for t in self.timestamps if t[0] < self.next_offset]
        self.log_start = min(self.log_start, self.end)
        assert self.log.log_end_offset == self.end

    @rule(data=st.data(), max_bytes=st.integers(1, 2000), min_one=st.booleans())
    def read(self, data, max_bytes, min_one):
        offset = data.draw(st.integers(self.log_start, self.end))
        result = self.log.read(offset, max_bytes, min_one_batch=min_one)
        got = result.records.tobytes() if result.records else b""
        expected = self.visible(offset)
        assert expected.startswith(got)
        if got:
            first = read_batch_header(got)
            assert first.base_offset <= offset <= first.last_offset or offset < first.base_offset
            assert len(got) <= max_bytes or len(list(iter_batch_headers(got, validate=False))) == 1
            headers = list(iter_batch_headers(got))  # CRC intact
            assert all(a.next_offset == b.base_offset for a, b in zip(headers, headers[1:]))
            assert result.next_offset == headers[-1].next_offset
        elif offset < self.end and min_one:
            raise AssertionError(f"no data at {offset} though the log ends at {self.end}")

    @rule(delta=st.integers(-100, 6000))
    def offset_for_timestamp(self, delta):
        target = BASE_TS + delta
        expected = next(((o, t) for o, t in self.timestamps if o >= self.log_start and t >= target), None)
        assert self.log.offset_for_timestamp(target) == expected

    @rule(offset=st.integers(-5, 0))
    def read_below_start(self, offset):
        if self.log_start + offset < self.log_start:
            try:
                self.log.read(self.log_start + offset, 100)
            except OffsetOutOfRangeError:
                return
            raise AssertionError("read below the log start offset succeeded")

    # ------------------------------------------------------------------ invariants
    @invariant()
    def whole_log_matches(self):
        if self.manager is None:
            return
        out = []
        offset = self.log_start
        while offset < self.log.log_end_offset:
            result = self.log.read(offset, 700)
            out.append(result.records.tobytes())
            assert result.next_offset > offset
            offset = result.next_offset
        assert b"".join(out) == self.visible(self.log_start)
        assert self.log.log_end_offset == self.end
        bases = [s.base_offset for s in self.log.segments]
        assert bases == sorted(bases) and bases[0] <= self.log_start


LogMachine.TestCase.settings = settings(max_examples=80, stateful_step_count=30, deadline=None,
                                        suppress_health_check=[HealthCheck.too_slow])
TestLogProperties = LogMachine.TestCase
