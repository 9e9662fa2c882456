#!/usr/bin/env python3
"""Coordinator loading: a broker restarted over 1,000,000 committed offsets.

Fills __consumer_offsets through the wire (OffsetCommit v8 from --groups groups of --partitions
partitions each: the records kafkapy's coordinator writes), then restarts the broker once per
--modes entry and measures, from the moment the process is started:
  * load time: the broker's own "loaded in" log line for __consumer_offsets-0;
  * ApiVersions round trips while it loads (max, p99, p50), from a client sending them back to
    back (sent after the first answer and before the offsets are back);
  * when OffsetFetch of the last group committed first returns its offset, and how many
    COORDINATOR_LOAD_IN_PROGRESS answers came before.
Modes (KAFKAPY_COORDINATOR_LOAD_MODE): "chunks" (the default: the loop decodes in 4 ms slices),
"thread" (a worker thread decodes), "blocking" (all at once before serving, the old behaviour).
offsets.topic.num.partitions=1 puts every record in one partition (the worst case).

    python bench/groups/offsets_load.py                          # 10,000 x 100 = 1M, three modes
    python bench/groups/offsets_load.py --groups 1000 --modes chunks
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from conformance.broker_process import start_broker  # noqa: E402
from conformance.coordinator_loading import LoadObservation, fill_offsets, observe_load  # noqa: E402
from conformance.test_groups_tools import create_topic  # noqa: E402

TOPIC = "loaded"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", type=int, default=10_000)
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--modes", default="chunks,thread,blocking")
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args()
    overrides = {"offsets.topic.num.partitions": "1", "log.retention.check.interval.ms": "3600000"}
    with start_broker(overrides=overrides, env=dict(os.environ)) as broker:
        create_topic(broker.bootstrap, TOPIC, args.partitions)
        started = time.monotonic()
        records = fill_offsets(broker.bootstrap, TOPIC, args.groups, args.partitions)
        fill_s = time.monotonic() - started
        size = sum(f.stat().st_size for f in (broker.data_dir / "__consumer_offsets-0").glob("*.log"))
        print(f"filled {records:,} offset commits ({args.groups:,} groups x {args.partitions} partitions,"
              f" {size / 1e6:.0f} MB of log) in {fill_s:.1f} s")
        probe, partition = f"load-group-{args.groups - 1}", args.partitions - 1
        print("| mode | load time (s) | first ApiVersions (s) | offsets back (s) | ApiVersions during load: n,"
              " p50 / p99 / max (ms) | COORDINATOR_LOAD_IN_PROGRESS answers |")
        print("|---|---|---|---|---|---|")
        for mode in args.modes.split(","):
            broker.stop()
            broker.env = {**os.environ, "KAFKAPY_COORDINATOR_LOAD_MODE": mode}
            log_start = broker.log_path.stat().st_size
            started = time.monotonic()
            broker.start(timeout=args.timeout)
            seen = observe_load(broker.bootstrap, probe, TOPIC, partition, started, timeout=args.timeout)
            assert seen.committed == 1000 + partition, (seen.committed, seen.other_errors)
            with open(broker.log_path, "rb") as log:
                log.seek(log_start)
                text = log.read().decode(errors="replace")
            loaded = re.search(r"__consumer_offsets-0: loaded in ([0-9.]+) s", text)
            load_s = float(loaded.group(1)) if loaded else float("nan")  # blocking mode logs no such line
            if not loaded:
                start_line = re.search(r"started in ([0-9.]+) s", text)
                load_s = float(start_line.group(1)) if start_line else float("nan")
            print(row(mode, load_s, seen))


def row(mode: str, load_s: float, seen: LoadObservation) -> str:
    during = seen.rtts_during_load()
    pct = LoadObservation.percentile
    rtts = (f"{len(during)}, {pct(during, 0.5) * 1e3:.1f} / {pct(during, 0.99) * 1e3:.1f} /"
            f" {max(during) * 1e3:.1f}" if during else "0 (none answered before the offsets)")
    first = seen.first_api_versions if seen.first_api_versions is not None else float("nan")
    return (f"| {mode} | {load_s:.2f} | {first:.2f} | {seen.offsets_ready:.2f} | {rtts} |"
            f" {seen.load_in_progress_answers} |")


if __name__ == "__main__":
    main()
