#!/usr/bin/env python3
"""Coordinator record decoders side by side in one run: hand-written (before and after the
unpack_from rewrite) against the construct layouts, to decide where construct may decode.

Measured in this process, best of --runs, per record:
  * OffsetCommitKey + OffsetCommitValue v3 (what every offset commit writes), over --records
    records for the hand-written decoders; construct over --construct-records (it is slow) and
    scaled to --records. "before" is records.py as of --before (git show), "after" the current one.
  * GroupMetadataValue v3 with 3 members, TransactionLogValue v0 with 2 topics, and a producer
    snapshot of 1,000 entries: hand-written against construct.
  * the mix a compacted __consumer_offsets holds for 10k groups x 100 partitions: 1M commits and
    10k group metadata records; what construct for GroupMetadataValue would add to it.

    python bench/groups/offsets_decode.py                  # 1M records
    python bench/groups/offsets_decode.py --records 200000 --construct-records 20000
"""
from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from collections import deque
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from kafkapy.groupcoord import layouts as group_layouts  # noqa: E402
from kafkapy.groupcoord import records  # noqa: E402
from kafkapy.groupcoord.group import GroupMetadata, GroupState, MemberMetadata, OffsetAndMetadata  # noqa: E402
from kafkapy.log.producer_state import BatchMetadata, ProducerStateEntry, read_snapshot, write_snapshot  # noqa: E402
from kafkapy.txncoord import layouts as txn_layouts  # noqa: E402
from kafkapy.txncoord import records as txn_records  # noqa: E402

BEFORE_COMMIT = "c1fcdba"  # records.py before the unpack_from decoders


def load_old_records(commit: str):
    """records.py as of `commit`, imported as a module of its own."""
    source = subprocess.run(["git", "-C", str(REPO), "show", f"{commit}:kafkapy/groupcoord/records.py"],
                            check=True, capture_output=True, text=True).stdout
    source = source.replace("from ..protocol.errors", "from kafkapy.protocol.errors")
    source = source.replace("from .group import", "from kafkapy.groupcoord.group import")
    spec = importlib.util.spec_from_loader("records_before", loader=None)
    module = importlib.util.module_from_spec(spec)
    sys.modules["records_before"] = module  # dataclasses look their module up
    exec(compile(source, f"records.py@{commit}", "exec"), module.__dict__)
    return module


def best(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def commit_records(n: int) -> list[tuple[bytes, bytes]]:
    return [(records.offset_commit_key(f"group-{i // 100}", "orders", i % 100),
             records.offset_commit_value(OffsetAndMetadata(1000 + i, 5, "", 1_700_000_000_000 + i)))
            for i in range(n)]


def group_value() -> bytes:
    group = GroupMetadata("g", GroupState.STABLE, 0)
    group.protocol_type, group.generation_id, group.protocol_name, group.current_state_timestamp = \
        "consumer", 12, "range", 1_700_000_000_000
    for m in range(3):
        group.add(MemberMetadata(
            member_id=f"consumer-1-{m:036d}", group_instance_id=None, client_id="consumer-1",
            client_host="/127.0.0.1", rebalance_timeout_ms=300_000, session_timeout_ms=45_000,
            protocol_type="consumer", supported_protocols=[("range", b"\x00\x01" + b"s" * 40)],
            assignment=b"\x00\x01" + b"a" * 60))
    return records.group_metadata_value(group, {})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--construct-records", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--before", default=BEFORE_COMMIT)
    args = parser.parse_args()
    old = load_old_records(args.before)

    pairs = commit_records(args.records)
    sample = pairs[:args.construct_records]
    key_layout, value_layout = group_layouts.OFFSET_COMMIT_KEY[1], group_layouts.OFFSET_COMMIT_VALUE[3]

    def decode_with(module, data):
        def run():
            dk, dv = module.decode_key, module.decode_offset_commit_value
            for key, value in data:
                dk(key)
                dv(value)
        return run

    def decode_construct():
        for key, value in sample:
            key_layout.parse(key)
            value_layout.parse(value)

    before = best(decode_with(old, pairs), args.runs)
    after = best(decode_with(records, pairs), args.runs)
    construct_s = best(decode_construct, 1) * args.records / len(sample)
    n = args.records
    print(f"OffsetCommitKey+Value v3, {n:,} records (best of {args.runs}):")
    print(f"  hand-written before ({args.before}): {before:7.2f} s  {before / n * 1e6:6.2f} us/record")
    print(f"  hand-written after (unpack_from): {after:7.2f} s  {after / n * 1e6:6.2f} us/record"
          f"  ({before / after:.2f}x faster)")
    print(f"  construct (from {len(sample):,}):       {construct_s:7.2f} s  {construct_s / n * 1e6:6.2f} us/record"
          f"  ({construct_s / after:.1f}x the hand-written)")

    # -- GroupMetadataValue -----------------------------------------------------------------
    gv = group_value()
    reps = 5000
    g_hand = best(lambda: [records.decode_group_metadata_value(gv) for _ in range(reps)], args.runs) / reps
    g_con = best(lambda: [group_layouts.GROUP_METADATA_VALUE[3].parse(gv) for _ in range(reps)], args.runs) / reps
    group = GroupMetadata("g", GroupState.STABLE, 0)
    group.protocol_type, group.protocol_name = "consumer", "range"
    for m in range(3):
        group.add(MemberMetadata(member_id=f"m{m}", group_instance_id=None, client_id="c", client_host="/h",
                                 rebalance_timeout_ms=1, session_timeout_ms=1, protocol_type="consumer",
                                 supported_protocols=[("range", b"s" * 40)], assignment=b"a" * 60))
    parsed = group_layouts.GROUP_METADATA_VALUE[3].parse(records.group_metadata_value(group, {}))
    w_old = best(lambda: [records.group_metadata_value(group, {}) for _ in range(reps)], args.runs) / reps
    w_con = best(lambda: [group_layouts.GROUP_METADATA_VALUE[3].build(parsed) for _ in range(reps)],
                 args.runs) / reps
    print("GroupMetadataValue v3, 3 members, per record:")
    print(f"  decode: hand-written {g_hand * 1e6:6.1f} us, construct {g_con * 1e6:6.1f} us ({g_con / g_hand:.1f}x)")
    print(f"  encode: hand-written {w_old * 1e6:6.1f} us, construct {w_con * 1e6:6.1f} us"
          f" ({w_con / w_old:.1f}x; once per generation, on the event loop)")
    groups = n // 100
    mix_hand = after + groups * g_hand
    mix_con = after + groups * g_con
    print(f"  {n:,} commits + {groups:,} group records: hand-written {mix_hand:.2f} s; with construct for"
          f" GroupMetadataValue {mix_con:.2f} s (+{(mix_con / mix_hand - 1) * 100:.0f}%)")

    # -- TransactionLogValue ----------------------------------------------------------------
    tv = txn_records.encode_value(txn_records.TransactionLogValue(
        4000, 3, 60_000, 1, {"orders": [0, 1, 2], "payments": [7]}, 1_700_000_000_000, 1_700_000_000_000))
    t_hand = best(lambda: [txn_records.decode_value(tv) for _ in range(reps)], args.runs) / reps
    t_con = best(lambda: [txn_layouts.TRANSACTION_LOG_VALUE[0].parse(tv) for _ in range(reps)], args.runs) / reps
    print(f"TransactionLogValue v0, 2 topics: decode hand-written {t_hand * 1e6:6.1f} us,"
          f" construct {t_con * 1e6:6.1f} us ({t_con / t_hand:.1f}x)")

    # -- producer snapshot --------------------------------------------------------------------
    sys.path.insert(0, str(REPO / "tests" / "log"))
    from test_producer_snapshot_layout import SNAPSHOT  # the layout lives with its test

    producers = {}
    for pid in range(1000):
        entry = ProducerStateEntry(pid, 1, last_timestamp=1_700_000_000_000)
        entry.batches = deque([BatchMetadata(0, 9, 100 * pid, 100 * pid + 9, 1_700_000_000_000)], maxlen=5)
        producers[pid] = entry
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "00000000000000001000.snapshot"
        write_snapshot(path, producers)
        data = path.read_bytes()
        s_hand = best(lambda: read_snapshot(path), args.runs)
        s_con = best(lambda: SNAPSHOT.parse(data), args.runs)
    print(f"producer snapshot, 1,000 entries: read hand-written {s_hand * 1e3:6.2f} ms, construct"
          f" {s_con * 1e3:6.2f} ms ({s_con / s_hand:.1f}x)")


if __name__ == "__main__":
    main()
