#!/usr/bin/env python3
"""How long the console's bounded message search holds the broker's event loop: a search that
finds nothing scans MAX_SCAN_RECORDS (20,000) records of ~110 bytes in a PartitionLog, on an
event loop with a ticker task. Prints the scan's total time and the loop's longest stall.

    python bench/console/search_stall.py [--runs 5]
"""
from __future__ import annotations

import argparse
import asyncio
import pathlib
import shutil
import tempfile
import time

from kafkapy.console import messages
from kafkapy.log.partition_log import PartitionLog
from kafkapy.protocol.records import build_batch


async def one_search(log) -> tuple[float, float, int]:
    gaps: list[float] = []
    done = False

    async def ticker() -> None:
        last = time.perf_counter()
        while not done:
            await asyncio.sleep(0)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    task = asyncio.ensure_future(ticker())
    started = time.perf_counter()
    page = await messages.read_page_async(log, 0, 50, "absent")
    total = time.perf_counter() - started
    done = True
    await task
    return total * 1000, max(gaps) * 1000, page.scanned


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    directory = pathlib.Path(tempfile.mkdtemp(prefix="kafkapy-search-stall-"))
    log = PartitionLog.open(directory / "t-0")
    try:
        for _ in range(250):
            log.append(bytearray(build_batch([(b"key-%d" % i, b'{"n": %d, "pad": "%s"}' % (i, b"x" * 80),
                                               [("h", b"v")]) for i in range(100)])))
        log.high_watermark = log.log_end_offset
        print(f"chunk {messages.READ_CHUNK_BYTES // 1024} KiB")
        for _ in range(args.runs):
            total, stall, scanned = asyncio.run(one_search(log))
            print(f"scanned {scanned} records in {total:.0f} ms; longest event-loop stall {stall:.1f} ms")
    finally:
        log.close()
        shutil.rmtree(directory, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
