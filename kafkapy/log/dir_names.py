"""Names of the directories in a log dir: `<topic>-<partition>`, and the suffixes of a partition
moving between log dirs (dir_move.py). Kept apart so that a broker with nothing on disk reads
its log dirs without importing the partition log, recovery or the mover."""
from __future__ import annotations

__all__ = ["FUTURE_SUFFIX", "MOVED_SUFFIX", "parse_partition_dir_name"]

FUTURE_SUFFIX = "-future"  # the copy a move is filling in the destination dir (Kafka's -future)
MOVED_SUFFIX = "-moved"  # the old copy, between the switch's two renames


def parse_partition_dir_name(name: str) -> tuple[str, int]:
    """`<topic>-<partition>` -> (topic, partition); raises ValueError otherwise."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        raise ValueError(f"{name!r} is not a <topic>-<partition> directory name")
    return topic, int(partition)
