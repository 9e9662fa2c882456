"""Log benchmarks: append and read throughput against plain file I/O, and group commit.

Run: python bench/log/bench_log.py [--quick] [--dir DIR]

1. Append: PartitionLog.append of pre-validated 16 KiB and 1 MiB batches (what the produce
   handler does) against a plain os.write loop of the same buffers to a file in the same
   directory. Same bytes, same count, best of N alternating rounds.
2. Read: PartitionLog.read(offset, 1 MiB) + os.sendfile of the returned FileSlice into a
   file, against a plain os.sendfile copy of the segment file in 1 MiB chunks.
3. Group commit: 32 asyncio writers in fsync_on_ack mode (append, then await
   sync_until) against the same writers doing one fdatasync per append.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kafkapy.replication.durability import wait_durable  # noqa: E402
from kafkapy.log import LogConfig, PartitionLog  # noqa: E402
from kafkapy.protocol.records import build_batch, read_batch_header  # noqa: E402


def make_batch(size: int) -> bytearray:
    overhead = 61 + 12  # header + record framing, roughly
    value = os.urandom(max(size - overhead, 1))
    buf = build_batch([(None, value)], base_timestamp=int(time.time() * 1000))
    return bytearray(buf)


def _plain_append(root: Path, batch: bytearray, count: int) -> tuple[float, float]:
    fd = os.open(root / "plain.bin", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(count):
        os.write(fd, batch)
    elapsed = time.perf_counter() - start, time.process_time() - cpu
    os.close(fd)
    return elapsed


def _log_append(root: Path, batch: bytearray, count: int) -> tuple[float, float]:
    plog = PartitionLog.open(root / "bench-0", LogConfig())
    validated = [read_batch_header(batch)]
    append = plog.append
    # Steady state: the first append of a leader epoch writes (and fsyncs) the
    # leader-epoch-checkpoint, once per leadership change, so it is not timed.
    append(batch, validated=validated)
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(count):
        append(batch, validated=validated)
    elapsed = time.perf_counter() - start, time.process_time() - cpu
    plog.abandon()
    return elapsed


def bench_append(root: Path, size: int, total_bytes: int, rounds: int) -> dict:
    """Best and median of `rounds` alternating runs; files are removed after each pair so
    neither side pays for the other's page-cache cleanup."""
    batch = make_batch(size)
    count = max(total_bytes // len(batch), 1)
    plains, ours = [], []
    for r in range(rounds):
        if r % 2 == 0:
            plains.append(_plain_append(root, batch, count))
            ours.append(_log_append(root, batch, count))
        else:
            ours.append(_log_append(root, batch, count))
            plains.append(_plain_append(root, batch, count))
        os.unlink(root / "plain.bin")
        shutil.rmtree(root / "bench-0")
    return _summary(count * len(batch) / 1e6, plains, ours) | {"batch": size, "count": count}


def _summary(mb: float, plains: list[tuple[float, float]], ours: list[tuple[float, float]]) -> dict:
    """Best and median wall-clock throughput and ratio, plus the best CPU-time ratio (user +
    system time of this process: robust to the scheduler on a shared machine)."""
    walls_p, walls_o = sorted(w for w, _ in plains), sorted(w for w, _ in ours)
    cpus_p, cpus_o = sorted(c for _, c in plains), sorted(c for _, c in ours)
    mid = len(walls_p) // 2
    return {"plain_mb_s": mb / walls_p[0], "log_mb_s": mb / walls_o[0], "ratio": walls_p[0] / walls_o[0],
            "median_ratio": walls_p[mid] / walls_o[mid],
            "cpu_ratio": cpus_p[0] / cpus_o[0] if cpus_o[0] > 0 else float("nan")}


def bench_read(root: Path, batch_size: int, total_bytes: int, rounds: int, fetch_bytes: int) -> dict:
    """Consume the whole log with 1 MiB fetches, sendfile-ing each FileSlice into a file,
    against a plain sendfile copy of the segment file in 1 MiB chunks; alternating rounds."""
    log_dir = root / "readbench-0"
    plog = PartitionLog.open(log_dir, LogConfig())
    batch = make_batch(batch_size)
    header = read_batch_header(batch)
    count = max(total_bytes // len(batch), 1)
    for _ in range(count):
        plog.append(batch, validated=[header])
    plog.flush()
    seg_path = plog.segments[0].path(".log")
    total = plog.segments[0].size
    out_path = root / "out.bin"

    def plain_copy() -> tuple[float, float]:
        src = os.open(seg_path, os.O_RDONLY)
        dst = os.open(out_path, os.O_WRONLY | os.O_CREAT, 0o644)
        start, cpu = time.perf_counter(), time.process_time()
        pos = 0
        while pos < total:
            n = os.sendfile(dst, src, pos, min(fetch_bytes, total - pos))
            pos += n
        elapsed = time.perf_counter() - start, time.process_time() - cpu
        os.close(src)
        os.close(dst)
        return elapsed

    def log_copy() -> tuple[float, float]:
        dst = os.open(out_path, os.O_WRONLY | os.O_CREAT, 0o644)
        start, cpu = time.perf_counter(), time.process_time()
        offset = 0
        end = plog.log_end_offset
        copied = 0
        while offset < end:
            result = plog.read(offset, fetch_bytes, max_offset=end)
            records = result.records
            fd = records.fileno()
            sent, pos, length = 0, records.position, records.length
            while sent < length:
                sent += os.sendfile(dst, fd, pos + sent, length - sent)
            copied += length
            offset = result.next_offset
        elapsed = time.perf_counter() - start, time.process_time() - cpu
        os.close(dst)
        assert copied == total, (copied, total)
        return elapsed

    plains, ours = [], []
    plain_copy()  # warm the page cache and allocate the output file once
    for r in range(rounds):
        # The output file is rewritten in place (no truncation), so neither side pays
        # for freeing the other's pages.
        if r % 2 == 0:
            plains.append(plain_copy())
            ours.append(log_copy())
        else:
            ours.append(log_copy())
            plains.append(plain_copy())
    plog.close()
    shutil.rmtree(log_dir)
    os.unlink(out_path)
    return _summary(total / 1e6, plains, ours) | {"batch": batch_size, "fetch_bytes": fetch_bytes}


async def _writers(plog: PartitionLog, batch: bytearray, writers: int, seconds: float,
                   group_commit: bool) -> int:
    header = read_batch_header(batch)
    deadline = time.perf_counter() + seconds
    acked = 0
    fd = plog.segments[-1].file.fileno()

    async def writer() -> None:
        nonlocal acked
        buf = bytearray(batch)
        while time.perf_counter() < deadline:
            result = plog.append(buf, validated=[read_batch_header(buf)])
            if group_commit:
                await wait_durable(plog.sync_until(result.last_offset))
            else:
                # One fsync per append: the naive "fsync before ack", serialised on the log.
                os.fdatasync(fd)
                await asyncio.sleep(0)
            acked += 1

    del header
    await asyncio.gather(*(writer() for _ in range(writers)))
    return acked


def bench_group_commit(root: Path, writers: int, seconds: float, batch_size: int) -> dict:
    batch = make_batch(batch_size)
    rates = {}
    for mode in ("per_append_fsync", "group_commit"):
        log_dir = root / f"gc-{mode.replace('_', '')}-0"
        plog = PartitionLog.open(log_dir, LogConfig(fsync_on_ack=True))
        start = time.perf_counter()
        acked = asyncio.run(_writers(plog, batch, writers, seconds, mode == "group_commit"))
        elapsed = time.perf_counter() - start
        rates[mode] = acked / elapsed
        if mode == "group_commit":
            rates["fsync_rounds"] = plog._flusher.fsync_rounds
        plog.close()
        shutil.rmtree(log_dir)
    rates["ratio"] = rates["group_commit"] / rates["per_append_fsync"]
    rates["writers"] = writers
    rates["batch"] = batch_size
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=None, help="directory on the disk under test")
    parser.add_argument("--quick", action="store_true", help="smaller sizes (CI smoke run)")
    args = parser.parse_args()
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="kafkapy-bench-log-"))
    base.mkdir(parents=True, exist_ok=True)
    # Many short alternating rounds, best taken: the machine is shared, and a quiet moment
    # is more likely to cover both sides of a short round than of a long one.
    total = (16 << 20) if args.quick else (32 << 20)
    rounds = 4 if args.quick else 21
    try:
        for size in (16 << 10, 1 << 20):
            r = bench_append(base, size, total, rounds)
            print(f"append {size >> 10:>5} KiB batches x{r['count']}: plain os.write {r['plain_mb_s']:8.0f} MB/s, "
                  f"PartitionLog.append {r['log_mb_s']:8.0f} MB/s, ratio {r['ratio']:.2f} "
                  f"(median {r['median_ratio']:.2f}, CPU time {r['cpu_ratio']:.2f})")
        for size in (16 << 10,):
            r = bench_read(base, size, total * 4, rounds, 1 << 20)
            print(f"read {size >> 10:>5} KiB batches, 1 MiB fetches: plain sendfile copy {r['plain_mb_s']:8.0f} MB/s, "
                  f"PartitionLog.read+sendfile {r['log_mb_s']:8.0f} MB/s, ratio {r['ratio']:.2f} "
                  f"(median {r['median_ratio']:.2f}, CPU time {r['cpu_ratio']:.2f})")
        r = bench_group_commit(base, 32, 1.0 if args.quick else 3.0, 1024)
        print(f"fsync mode, {r['writers']} writers, {r['batch']} B batches: one fsync per append "
              f"{r['per_append_fsync']:8.0f} acks/s, group commit {r['group_commit']:8.0f} acks/s "
              f"({r['fsync_rounds']} fsyncs), ratio {r['ratio']:.1f}x")
    finally:
        if not args.dir:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
