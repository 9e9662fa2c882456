#!/usr/bin/env python3
"""Coordinator load cost of consumer group (KIP-848) records, and that classic loads do not pay for them.

Builds one in-memory __consumer_offsets partition (tests/groupcoord/fakes.MemoryLogs) and times
GroupMetadataManager.load_partition over it, in a fresh child process per run (best of --loads
loads each), for two workloads:
  * classic: --offsets offset commits (batches of 100 partitions, as OffsetCommit writes them),
    the data bench/groups/offsets_load.py loads over the wire;
  * consumer: --groups consumer groups of --members members each, written through the records
    a heartbeat writes (join, target, reconciliation steps), plus one offset commit per member.
With --baseline PATH (a checkout of an earlier commit, e.g. `git archive <rev> | tar -x -C PATH`)
the classic workload (and decode_key alone over its keys) is also timed against that tree, runs
alternating, so both see the same machine load. Times are the child's CPU time (process_time):
the load is single-threaded, and on a shared machine wall time mostly measures the neighbours.

    python bench/groups/consumer_records_load.py --baseline /tmp/base --repeat 5
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

CHILD = r"""
import sys, time, uuid
sys.path.insert(0, sys.argv[1])
from kafkapy.groupcoord.group import GroupMetadata, GroupState, OffsetAndMetadata
from kafkapy.groupcoord.metadata_manager import GroupMetadataManager
from kafkapy.groupcoord.offsets_topic import OffsetsTopicStore
from kafkapy.groupcoord.records import offset_commit_key, offset_commit_value
from tests.groupcoord.fakes import MemoryLogs

workload, count, members, loads = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
logs = MemoryLogs()
store = OffsetsTopicStore(logs)
records = 0
if workload == "keys":
    # decode_key alone over classic offset-commit keys: the part of a classic load the change touches
    from kafkapy.groupcoord.records import decode_key
    keys = [offset_commit_key(f"group-{i // 100}", "topic", i % 100) for i in range(count)]
    best = float("inf")
    for _ in range(loads * 3):
        started = time.process_time()
        for key in keys:
            decode_key(key)
        best = min(best, time.process_time() - started)
    print(f"{count} 0 {best:.4f}")
    sys.exit(0)
elif workload == "classic":
    for i in range(0, count, 100):
        group = f"group-{i // 100}"
        batch = [(offset_commit_key(group, "topic", p), offset_commit_value(OffsetAndMetadata(1000 + p, 0, "", 1, -1)))
                 for p in range(100)]
        store.append(0, batch, 1)
        records += len(batch)
else:
    from kafkapy.groupcoord.consumer.group import ConsumerGroup, ConsumerGroupMember, MemberState, TopicMetadata
    from kafkapy.groupcoord.consumer import persistence as p
    topic = uuid.UUID(int=7)
    partitions = members * 2
    for g in range(count):
        gid = f"cgroup-{g}"
        group = ConsumerGroup(gid)
        for m in range(members):
            member = ConsumerGroupMember(f"{gid}-m{m}", client_id="c", client_host="/127.0.0.1",
                                         rebalance_timeout_ms=30000, subscribed_topic_names=["topic"])
            group.add_member(member)
            group.group_epoch += 1
            group.subscribed_topic_metadata = {"topic": TopicMetadata(topic, "topic", partitions)}
            batch = [p.member_subscription_record(gid, member),
                     p.subscription_metadata_record(gid, group.subscribed_topic_metadata),
                     p.group_epoch_record(gid, group.group_epoch)]
            ids = list(group.members)
            group.target = {mid: {topic: frozenset(range(i, partitions, len(ids)))} for i, mid in enumerate(ids)}
            group.assignment_epoch = group.group_epoch
            batch += p.target_assignment_records(gid, group.target, group.assignment_epoch)
            for mid in ids:
                mem = group.members[mid]
                mem.previous_member_epoch, mem.member_epoch = mem.member_epoch, group.assignment_epoch
                group.set_member_assignment(mem, {}, {})
            for mid in ids:
                mem = group.members[mid]
                group.set_member_assignment(mem, group.target[mid], {})
                batch.append(p.current_assignment_record(gid, mem))
            store.append(0, batch, 1)
            records += len(batch)
        commits = [(offset_commit_key(gid, "topic", q), offset_commit_value(OffsetAndMetadata(5, 0, "", 1, -1)))
                   for q in range(partitions)]
        store.append(0, commits, 1)
        records += len(commits)
best = float("inf")
for _ in range(loads):
    manager = GroupMetadataManager(store, 1, lambda: 1)
    started = time.process_time()
    groups = manager.load_partition(0)
    best = min(best, time.process_time() - started)
print(f"{records} {len(groups)} {best:.4f}")
"""


def run(tree: Path, workload: str, count: int, members: int, loads: int) -> tuple[int, int, float]:
    out = subprocess.run([sys.executable, "-c", CHILD, str(tree), workload, str(count), str(members), str(loads)],
                         capture_output=True, text=True, cwd=tree, timeout=600)
    if out.returncode != 0:
        raise SystemExit(f"{tree} {workload} failed:\n{out.stderr}")
    records, groups, seconds = out.stdout.split()
    return int(records), int(groups), float(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--offsets", type=int, default=300_000)
    parser.add_argument("--groups", type=int, default=1_000)
    parser.add_argument("--members", type=int, default=10)
    parser.add_argument("--loads", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--baseline", type=Path, default=None)
    args = parser.parse_args()
    trees = [("this tree", REPO)] + ([("baseline", args.baseline.resolve())] if args.baseline else [])
    for workload, what in (("keys", "decode_key of offset commit keys"), ("classic", "load of offset commits")):
        times: dict[str, list[float]] = {name: [] for name, _ in trees}
        for _ in range(args.repeat):
            for name, tree in trees:
                records, groups, seconds = run(tree, workload, args.offsets, 0, args.loads)
                times[name].append(seconds)
        print(f"{workload}: {what}, {records:,} records; best of {args.loads} per run")
        for name, values in times.items():
            print(f"  {name}: best {min(values):.3f} s, median {statistics.median(values):.3f} s, runs"
                  f" {', '.join(f'{v:.3f}' for v in values)} ({records / min(values) / 1e3:.0f}k records/s at best)")
        if args.baseline:
            best = min(times["this tree"]) / min(times["baseline"])
            median = statistics.median(times["this tree"]) / statistics.median(times["baseline"])
            print(f"  this tree / baseline: {best:.3f} (best), {median:.3f} (median)")
    records, groups, seconds = run(REPO, "consumer", args.groups, args.members, args.loads)
    print(f"consumer: {args.groups:,} groups x {args.members} members, {records:,} records: load {seconds:.3f} s"
          f" ({records / seconds / 1e3:.0f}k records/s, {seconds / groups * 1e3:.2f} ms per group)")


if __name__ == "__main__":
    main()
