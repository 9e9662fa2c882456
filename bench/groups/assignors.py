#!/usr/bin/env python3
"""Benchmark: the server-side assignors (KIP-848) on groups of 10/100/1000 members x 100/1000/10000 partitions.

Pure CPU, no broker. The partitions are spread over 10 topics. "homogeneous": every member
subscribes to all 10 topics; "heterogeneous": each member subscribes to 5 of them (seeded random).
Columns (milliseconds, median of --repeat runs):

  uniform new     the first assignment (no current assignment)
  uniform leave   the next one after one member left (current = the previous result: the sticky path
                  the coordinator takes on every membership change)
  uniform join    the next one after a member joined
  range           RangeAssignor (it ignores current assignments)

    python bench/groups/assignors.py
    python bench/groups/assignors.py --repeat 1 --members 10 100 --partitions 100 1000
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from kafkapy.groupcoord.consumer.assignors import MemberSpec, RangeAssignor, TopicSpec, UniformAssignor  # noqa: E402

N_TOPICS = 10


def build(n_members: int, n_partitions: int, heterogeneous: bool, seed: int = 7):
    rnd = random.Random(seed)
    topics = {}
    for t in range(N_TOPICS):
        tid = uuid.UUID(int=t + 1)
        count = n_partitions // N_TOPICS + (1 if t < n_partitions % N_TOPICS else 0)
        topics[tid] = TopicSpec(tid, f"topic-{t}", count, {})
    ids = sorted(topics)
    members = {}
    for i in range(n_members):
        subs = frozenset(rnd.sample(ids, N_TOPICS // 2)) if heterogeneous else frozenset(ids)
        mid = f"member-{i:05d}"
        members[mid] = MemberSpec(mid, None, None, subs, {})
    return members, topics


def with_current(members, result):
    return {mid: MemberSpec(m.member_id, m.instance_id, m.rack_id, m.subscribed_topic_ids, result.get(mid, {}))
            for mid, m in members.items()}


def timed(fn, repeat: int) -> tuple[float, object]:
    samples = []
    result = None
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--members", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--partitions", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    uniform, range_ = UniformAssignor(), RangeAssignor()
    print(f"python {sys.version.split()[0]}, median of {args.repeat} runs, milliseconds")
    print(f"| {'members':>7} | {'partitions':>10} | {'subscriptions':<13} | {'uniform new':>11} | "
          f"{'uniform leave':>13} | {'uniform join':>12} | {'range':>8} |")
    print(f"|{'-' * 9}|{'-' * 12}|{'-' * 15}|{'-' * 13}|{'-' * 15}|{'-' * 14}|{'-' * 10}|")
    for n_members in args.members:
        for n_partitions in args.partitions:
            for heterogeneous in (False, True):
                members, topics = build(n_members, n_partitions, heterogeneous)
                new_ms, first = timed(lambda: uniform.assign(members, topics), args.repeat)
                stable = with_current(members, first)
                left = dict(stable)
                del left[next(iter(left))]
                leave_ms, _ = timed(lambda: uniform.assign(left, topics), args.repeat)
                joined = dict(stable)
                some = next(iter(members.values()))
                joined["member-new"] = MemberSpec("member-new", None, None, some.subscribed_topic_ids, {})
                join_ms, _ = timed(lambda: uniform.assign(joined, topics), args.repeat)
                range_ms, _ = timed(lambda: range_.assign(members, topics), args.repeat)
                kind = "heterogeneous" if heterogeneous else "homogeneous"
                print(f"| {n_members:>7} | {n_partitions:>10} | {kind:<13} | {new_ms:>11.1f} | {leave_ms:>13.1f} | "
                      f"{join_ms:>12.1f} | {range_ms:>8.1f} |", flush=True)


if __name__ == "__main__":
    main()
