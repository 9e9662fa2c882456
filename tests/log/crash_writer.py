"""A writer process for the crash tests: appends in fsync_on_ack mode and reports every ack.

Usage: python crash_writer.py <log dir> <seed>

Several asyncio writers append deterministic batches (see `expected_batch`) and, once
`sync_until` says a batch is on disk, print "ack <writer> <seq> <base> <last>". The test
SIGKILLs this process at a random moment; whatever was printed was acknowledged.
"""
from __future__ import annotations

import asyncio
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kafkapy.log import LogConfig, LogManager  # noqa: E402
from kafkapy.protocol.records import build_batch, set_base_offset, set_partition_leader_epoch  # noqa: E402

TOPIC = "crash"
BASE_TS = 1_700_000_000_000
WRITERS = 6


def writer_config(seed: int) -> LogConfig:
    rng = random.Random(seed)
    return LogConfig(segment_bytes=rng.choice([2048, 4096, 16384]), index_interval_bytes=rng.choice([0, 128, 1024]),
                     segment_index_bytes=rng.choice([64, 4096]), fsync_on_ack=True, retention_ms=-1)


def expected_batch(run: int, writer: int, seq: int, base_offset: int | None = None) -> bytearray:
    """The batch writer `writer` of run `run` appended as its `seq`-th."""
    rng = random.Random((run * 1000 + writer) * 1_000_003 + seq)
    records = [(b"w%d-%d" % (writer, seq), rng.randbytes(rng.randrange(1, 300)))
               for _ in range(rng.randrange(1, 5))]
    buf = bytearray(build_batch(records, base_timestamp=BASE_TS + seq))
    if base_offset is not None:
        set_base_offset(buf, base_offset)
        set_partition_leader_epoch(buf, 0)
    return buf


async def main(log_dir: str, seed: int, run: int) -> None:
    manager = LogManager([log_dir], writer_config(seed))
    manager.load()
    plog = manager.create(TOPIC, 0)
    out = sys.stdout
    out.write(f"ready {plog.log_end_offset}\n")
    out.flush()

    async def writer(w: int) -> None:
        seq = 0
        while True:
            result = plog.append(expected_batch(run, w, seq), leader_epoch=0)
            await asyncio.wrap_future(plog.sync_until(result.last_offset))
            out.write(f"ack {w} {seq} {result.base_offset} {result.last_offset}\n")
            out.flush()
            seq += 1

    await asyncio.gather(*(writer(w) for w in range(WRITERS)))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
