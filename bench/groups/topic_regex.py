#!/usr/bin/env python3
"""Benchmark: resolving a SubscribedTopicRegex against the topics of a cluster (KIP-848).

Pure CPU, no broker. ``matching_topics`` (RE2J syntax, lazily built DFA, linear time) against
Python's backtracking ``re`` running the equivalent pattern (``compile_topic_regex``), on
--topics topic names such as ``orders.eu-west.v2-123``. "cold" is the first resolution of a new
pattern (the DFA is built while matching), "warm" a later one (after a topic change, say).
Then a pattern that makes a backtracking engine exponential, on one name of growing length.

    python bench/groups/topic_regex.py
    python bench/groups/topic_regex.py --topics 100000
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from kafkapy.groupcoord.consumer import topic_regex  # noqa: E402

PATTERNS = [
    r"orders\..*",
    r".*\.v2-\d+",
    r"(?i)ORDERS\.(eu|us)-[a-z]+\.v[0-9]+-1.*",
    r"\borders\b.*",
    r"[a-z]+\.[a-z]+-[a-z]+\.v\d-\d{1,3}",
]


def topic_names(n: int, seed: int = 3) -> list[str]:
    rnd = random.Random(seed)
    kinds = ["orders", "payments", "clicks", "audit", "inventory", "users"]
    regions = ["eu-west", "eu-central", "us-east", "us-west", "ap-south"]
    return [f"{rnd.choice(kinds)}.{rnd.choice(regions)}.v{rnd.randint(1, 3)}-{i}" for i in range(n)]


def timed(fn, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--topics", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    names = topic_names(args.topics)
    print(f"python {sys.version.split()[0]}, {args.topics} topics, milliseconds (warm: median of {args.repeat})")
    print(f"| {'pattern':<44} | {'matches':>7} | {'ours cold':>9} | {'ours warm':>9} | {'re':>7} |")
    print(f"|{'-' * 46}|{'-' * 9}|{'-' * 11}|{'-' * 11}|{'-' * 9}|")
    for pattern in PATTERNS:
        topic_regex._program.cache_clear()
        started = time.perf_counter()
        found = topic_regex.matching_topics(pattern, names)
        cold = (time.perf_counter() - started) * 1000
        warm = timed(lambda: topic_regex.matching_topics(pattern, names), args.repeat)
        compiled = topic_regex.compile_topic_regex(pattern)
        python = timed(lambda: topic_regex.matching_topics(compiled, names), args.repeat)
        assert topic_regex.matching_topics(compiled, names) == found
        print(f"| {'`' + pattern.replace('|', chr(92) + '|') + '`':<44} | {len(found):>7} | {cold:>9.1f} | "
              f"{warm:>9.1f} | {python:>7.1f} |", flush=True)

    bomb = "(a|aa)*b"
    print(f"\n`{bomb}` on one name of n a's (no match), milliseconds")
    print(f"| {'n':>4} | {'ours':>7} | {'re':>9} |")
    print(f"|{'-' * 6}|{'-' * 9}|{'-' * 11}|")
    compiled = topic_regex.compile_topic_regex(bomb)
    for n in (16, 20, 24, 28, 249):
        name = ["a" * n]
        ours = timed(lambda: topic_regex.matching_topics(bomb, name), 3)
        if n <= 28:
            python = f"{timed(lambda: topic_regex.matching_topics(compiled, name), 1):>9.1f}"
        else:
            python = "(skipped)"
        print(f"| {n:>4} | {ours:>7.3f} | {python:>9} |", flush=True)


if __name__ == "__main__":
    main()
