"""Differences between kafkapy and Kafka 4.4.0 (KRaft) that the share-consumer differential accepts.

Each entry is (scenario, key of `observed`) -> one-line reason. The rest of `observed`, and
`status`, must be the same. kafkapy defects are not listed here: they are strict xfails in
test_java_share_consumer.py (DEFECTS), so they show until fixed.
"""
from __future__ import annotations

__all__ = ["KNOWN_DIFFERENCES", "DEFECTS"]

_TRAILING_START_OFFSET = (
    "Kafka's SharePartition moves its start offset only after a state write succeeds, so the start offset "
    "the share coordinator holds (DescribeShareGroupOffsets, kafka-share-groups START-OFFSET) trails by one "
    "write (0 after every record was acknowledged); kafkapy answers the start offset after the write. The "
    "LAG is the same (Kafka subtracts the delivery-complete count)")

KNOWN_DIFFERENCES: dict[tuple[str, str], str] = {
    ("describe_and_offsets", "start_offsets_after_consume"): _TRAILING_START_OFFSET,
    ("delivery_count_limit", "start_offset"): _TRAILING_START_OFFSET,
}

# scenario -> the kafkapy defect that makes it differ from Kafka 4.4.0 (strict xfail).
DEFECTS: dict[str, str] = {
    # fixed: "more_members_than_partitions" (kafkapy/groupcoord/share/assignor.py, Kafka's simple assignor)
}
