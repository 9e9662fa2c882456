"""Crash tests: writers killed with SIGKILL at random moments, and segment, index and
checkpoint files truncated, zeroed or bit-flipped at random bytes.

After recovery:
- every batch acknowledged in fsync mode is present, byte for byte (damage is only ever
  applied where a power loss could put it: after the fsynced and flushed data),
- what is served is a prefix of what was written, and nothing from the batch holding the
  first damaged byte on is served,
- the log accepts appends again, and survives another (clean) restart.

Two families: subprocess cases (a real writer process, SIGKILL, then tail damage
emulating the power loss) and many small in-process cases (the files as a kill leaves
them, via PartitionLog.abandon, then one damage mode each).
"""
from __future__ import annotations

import os
import random
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from kafkapy.log import LogConfig, LogManager, PartitionLog
from kafkapy.protocol.errors import CorruptRecordError
from kafkapy.protocol.records import build_batch, validate_batch

from crash_writer import TOPIC, expected_batch

from logtools import read_all

SUBPROCESS_CASES = 8  # x2 kills each
IN_PROCESS_CASES = 240
WRITER = Path(__file__).with_name("crash_writer.py")


# ----------------------------------------------------------------------------- file helpers
@dataclass
class Stream:
    """The concatenated .log files of a partition, as left by the crash, parsed."""

    files: list[tuple[int, Path, int]]  # (base offset, path, global start position)
    data: bytes
    batches: list[tuple[int, int, int, int]]  # (global position, size, base offset, last offset)

    @property
    def valid_end(self) -> int:
        return self.batches[-1][0] + self.batches[-1][1] if self.batches else 0

    def batch_start_at_or_before(self, position: int) -> int:
        start = 0
        for pos, size, _, _ in self.batches:
            if pos <= position:
                start = pos
            if pos <= position < pos + size:
                return pos
        return min(start, position) if position < self.valid_end else self.valid_end

    def position_of_offset(self, offset: int) -> int:
        for pos, size, base, last in self.batches:
            if last >= offset:
                return pos
        return self.valid_end

    def locate(self, position: int) -> tuple[Path, int]:
        for base, path, start in reversed(self.files):
            if position >= start:
                return path, position - start
        raise ValueError(position)


def read_stream(partition_dir: Path) -> Stream:
    files = []
    chunks = []
    start = 0
    for path in sorted(partition_dir.glob("*.log")):
        data = path.read_bytes()
        files.append((int(path.name[:20]), path, start))
        chunks.append(data)
        start += len(data)
    data = b"".join(chunks)
    batches = []
    expected = None
    for base, path, seg_start in files:
        pos = seg_start
        end = seg_start + len(chunks[files.index((base, path, seg_start))])
        if expected is not None and base != expected:
            break
        while pos < end:
            try:
                header = validate_batch(data[:end], pos)
            except CorruptRecordError:
                break  # a write torn by the kill: the rest of this file is not a batch
            if expected is not None and header.base_offset != expected:
                break
            batches.append((pos, header.size, header.base_offset, header.last_offset))
            expected = header.last_offset + 1
            pos += header.size
        else:
            continue
        break
    return Stream(files, data, batches)


def flip_bits(path: Path, local: int, rng: random.Random) -> None:
    with open(path, "r+b") as f:
        f.seek(local)
        byte = f.read(1)[0]
        f.seek(local)
        f.write(bytes([byte ^ (1 << rng.randrange(8))]))


def damage_tail(stream: Stream, safe_end: int, rng: random.Random, mode: str) -> int | None:
    """Damage the files at or after global position `safe_end`; return the first damaged
    position (None if nothing was damaged)."""
    total = len(stream.data)
    if total <= safe_end:
        return None
    position = rng.randrange(safe_end, total)
    path, local = stream.locate(position)
    if mode == "truncate":
        with open(path, "r+b") as f:
            f.truncate(local)
        if rng.random() < 0.5:  # the later files may or may not have reached the disk
            for base, later, start in stream.files:
                if start > position:
                    later.unlink()
        return position
    if mode == "zero":
        length = rng.randrange(1, 600)
        with open(path, "r+b") as f:
            f.seek(local)
            size = os.fstat(f.fileno()).st_size
            f.write(b"\x00" * max(min(length, size - local), 1))
        return position
    if mode == "flip":
        positions = sorted({position} | {rng.randrange(position, total) for _ in range(rng.randrange(3))})
        for p in positions:
            flip_bits(*stream.locate(p), rng)
        return position
    if mode == "drop_last_file":
        base, last_path, start = stream.files[-1]
        if start < safe_end or len(stream.files) == 1:
            return None
        last_path.unlink()
        return start
    raise ValueError(mode)


def check_recovered(plog: PartitionLog, stream: Stream, first_damage: int | None,
                    acked: dict[int, bytes]) -> bytes:
    """The assertions every case makes; returns the served bytes."""
    served = read_all(plog, max_bytes=rng_max_bytes(len(stream.data)))
    assert stream.data.startswith(served), "served bytes that were never written there"
    assert len(served) <= stream.valid_end
    if first_damage is None:
        assert len(served) == stream.valid_end, "lost undamaged data"
    else:
        limit = stream.batch_start_at_or_before(first_damage)
        assert len(served) <= limit, f"served past the first damaged byte ({len(served)} > {limit})"
    for base, data in acked.items():
        pos = stream.position_of_offset(base)
        assert served[pos:pos + len(data)] == data, f"acknowledged batch at offset {base} lost"
    # served batches have contiguous offsets and intact CRCs
    expected = plog.log_start_offset
    pos = 0
    while pos < len(served):
        header = validate_batch(served, pos)
        assert header.base_offset == expected
        expected = header.last_offset + 1
        pos += header.size
    assert expected == plog.log_end_offset
    return served


def rng_max_bytes(total: int) -> int:
    return max(total // 3, 1)


def check_appends_again(plog: PartitionLog, served: bytes) -> bytes:
    end = plog.log_end_offset
    extra = bytearray(build_batch([(b"again", b"x" * 50)], base_timestamp=1_700_000_000_000))
    assert plog.append(extra, leader_epoch=0).base_offset == end
    assert read_all(plog) == served + bytes(extra)
    return served + bytes(extra)


# ----------------------------------------------------------------------------- subprocess kills
def _run_writer(log_dir: Path, seed: int, run: int, rng: random.Random) -> dict[int, tuple[int, int, int]]:
    """Start the writer, SIGKILL it after a random number of acks; return base -> (writer, seq, last)."""
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    proc = subprocess.Popen([sys.executable, str(WRITER), str(log_dir), str(seed), str(run)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    target = rng.randrange(1, 120)
    acks: dict[int, tuple[int, int, int]] = {}
    buffer = b""
    deadline = time.monotonic() + 20
    try:
        while len(acks) < target and time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], 0.5)
            if not ready:
                if proc.poll() is not None:
                    raise AssertionError(f"writer exited: {proc.stderr.read().decode()[-2000:]}")
                continue
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                break
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                parts = line.split()
                if parts and parts[0] == b"ack":
                    w, seq, base, last = map(int, parts[1:])
                    acks[base] = (w, seq, last)
        if rng.random() < 0.5:
            time.sleep(rng.random() * 0.05)  # land the kill anywhere, not only right after an ack
    finally:
        proc.send_signal(signal.SIGKILL)
        rest, _ = proc.communicate(timeout=30)
    for line in (buffer + rest).split(b"\n"):
        parts = line.split()
        if len(parts) == 5 and parts[0] == b"ack":
            w, seq, base, last = map(int, parts[1:])
            acks[base] = (w, seq, last)
    assert proc.returncode == -signal.SIGKILL
    return acks


@pytest.mark.parametrize("seed", range(SUBPROCESS_CASES))
def test_sigkill_writer_then_power_loss_damage(tmp_path, seed):
    rng = random.Random(seed)
    data_dir = tmp_path / "data"
    all_acked: dict[int, bytes] = {}
    for run in (1, 2):
        acks = _run_writer(data_dir, seed, run, rng)
        assert acks, "the writer acknowledged nothing"
        for base, (w, seq, last) in acks.items():
            all_acked[base] = bytes(expected_batch(run, w, seq, base))
        partition_dir = data_dir / f"{TOPIC}-0"
        stream = read_stream(partition_dir)
        durable = max(stream.position_of_offset(base) + len(all_acked[base]) for base in all_acked)
        mode = rng.choice(["none", "truncate", "flip", "zero", "drop_last_file"])
        first_damage = None if mode == "none" else damage_tail(stream, durable, rng, mode)
        manager = LogManager([str(data_dir)], LogConfig())
        manager.load()
        plog = manager.get(TOPIC, 0)
        served = check_recovered(plog, stream, first_damage, all_acked)
        check_appends_again(plog, served)
        manager.close()
        # the next run (and the extra batch) continue from here
        all_acked = {b: d for b, d in all_acked.items()}


# ----------------------------------------------------------------------------- in-process cases
IN_PROCESS_MODES = ["none", "truncate", "flip", "zero", "drop_last_file", "flip_anywhere_full_rescan",
                    "truncate_anywhere_full_rescan", "index_garbage", "epoch_checkpoint_garbage"]


def _random_batch(rng: random.Random, ts: int) -> bytearray:
    records = [(b"k%d" % rng.randrange(100), rng.randbytes(rng.randrange(0, 200)), (), ts + i)
               for i in range(rng.randrange(1, 6))]
    return bytearray(build_batch(records, base_timestamp=ts))


@pytest.mark.parametrize("seed", range(IN_PROCESS_CASES))
def test_in_process_crash_and_damage(tmp_path, seed):
    rng = random.Random(10_000 + seed)
    mode = IN_PROCESS_MODES[seed % len(IN_PROCESS_MODES)]
    config = LogConfig(segment_bytes=rng.choice([1200, 2000, 4000]),
                       index_interval_bytes=rng.choice([0, 64, 512]),
                       segment_index_bytes=rng.choice([24, 96, 4096]), fsync_on_ack=True,
                       retention_ms=-1, file_delete_delay_ms=0)
    partition_dir = tmp_path / "crash-0"
    plog = PartitionLog.open(partition_dir, config)
    acked: dict[int, bytes] = {}
    pending: dict[int, bytes] = {}
    ts = 1_700_000_000_000
    for _ in range(rng.randrange(3, 40)):
        ts += rng.randrange(0, 1000)
        buf = _random_batch(rng, ts)
        result = plog.append(buf, leader_epoch=0)
        pending[result.base_offset] = bytes(buf)
        if rng.random() < 0.3:
            plog.sync_until(result.last_offset).result(timeout=10)
            acked.update(pending)
            pending.clear()
        if rng.random() < 0.05:
            plog.roll()
    recovery_point = plog.recovery_point
    plog.abandon()  # what SIGKILL leaves: the files, no marker, no trimmed indexes

    stream = read_stream(partition_dir)
    assert stream.valid_end == len(stream.data)
    durable = max((stream.position_of_offset(b) + len(d) for b, d in acked.items()), default=0)
    safe_end = max(durable, stream.position_of_offset(recovery_point))
    first_damage = None
    full_rescan = mode.endswith("_full_rescan")
    if mode in ("truncate", "flip", "zero", "drop_last_file"):
        first_damage = damage_tail(stream, safe_end, rng, mode)
    elif full_rescan:
        # Media damage anywhere: only a full rescan (no recovery point) can find it, and
        # acknowledged data at or after it is gone by definition.
        first_damage = damage_tail(stream, 0, rng, mode.split("_")[0])
        recovery_point = 0
        if first_damage is not None:
            limit = stream.batch_start_at_or_before(first_damage)
            acked = {b: d for b, d in acked.items() if stream.position_of_offset(b) + len(d) <= limit}
    elif mode == "index_garbage":
        indexes = sorted(partition_dir.glob("*.index")) + sorted(partition_dir.glob("*.timeindex"))
        victim = rng.choice(indexes)
        size = victim.stat().st_size
        with open(victim, "r+b") as f:
            if size and rng.random() < 0.7:
                f.seek(rng.randrange(size))
                f.write(os.urandom(rng.randrange(1, 24)))
            else:
                f.truncate(rng.randrange(size + 1) if size else 0)
    elif mode == "epoch_checkpoint_garbage":
        (partition_dir / "leader-epoch-checkpoint").write_bytes(os.urandom(rng.randrange(0, 40)))

    plog = PartitionLog.open(partition_dir, config, recovery_point=recovery_point)
    served = check_recovered(plog, stream, first_damage, acked)
    assert plog.leader_epochs.entries() in ([], [(0, plog.log_start_offset)], [(0, 0)])
    served = check_appends_again(plog, served)
    plog.close()
    plog = PartitionLog.open(partition_dir, config, clean_shutdown=True)
    assert read_all(plog) == served
    plog.close()
