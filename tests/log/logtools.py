"""Helpers shared by the partition log tests: batch builders and whole-log readers."""
from __future__ import annotations

import random

from kafkapy.log import LogConfig, PartitionLog
from kafkapy.protocol.records import build_batch, read_batch_header

BASE_TS = 1_700_000_000_000


def batch(n_records: int = 1, value_size: int = 10, ts: int = BASE_TS, *, seed: int | None = None,
          producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
          ts_step: int = 0) -> bytearray:
    """An uncompressed v2 batch (offset 0) with deterministic contents."""
    rng = random.Random(seed if seed is not None else (n_records * 1_000_003 + value_size + ts))
    records = [(b"k%d" % i, rng.randbytes(value_size), (), ts + i * ts_step) for i in range(n_records)]
    return bytearray(build_batch(records, base_timestamp=ts, producer_id=producer_id,
                                 producer_epoch=producer_epoch, base_sequence=base_sequence))


def read_all(plog: PartitionLog, max_bytes: int = 1 << 20, start: int | None = None) -> bytes:
    """Every byte from `start` (default: log start) to the end, fetched in max_bytes reads."""
    out = []
    offset = plog.log_start_offset if start is None else start
    while offset < plog.log_end_offset:
        result = plog.read(offset, max_bytes)
        if not result.records:
            break
        out.append(result.records.tobytes())
        assert result.next_offset > offset
        offset = result.next_offset
    return b"".join(out)


def batches_in(data: bytes) -> list[bytes]:
    """Split back-to-back batches."""
    out, pos = [], 0
    while pos < len(data):
        header = read_batch_header(data, pos)
        out.append(bytes(data[pos:pos + header.size]))
        pos += header.size
    return out


def small_config(**overrides) -> LogConfig:
    base = dict(segment_bytes=4096, index_interval_bytes=256, segment_index_bytes=4096,
                file_delete_delay_ms=0)
    base.update(overrides)
    return LogConfig(**base)
