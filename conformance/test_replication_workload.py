"""The replication campaign's read-back check on hand-made logs (no servers): it must see every kind
of violation, or a campaign could pass without having looked."""
from __future__ import annotations

from conformance.replication_campaign import round_plan
from conformance.replication_workload import check_records, decode_value, encode_value


def log_of(partition: int, seqs: list[int], first_offset: int = 0) -> list[tuple[int, bytes]]:
    return [(first_offset + i, encode_value(partition, s)) for i, s in enumerate(seqs)]


def acked_at(seqs: list[int]) -> dict[int, int]:
    """seq -> offset, for records acknowledged in the order they were written from offset 0."""
    return {s: i for i, s in enumerate(seqs)}


def test_values_round_trip_and_foreign_values_do_not_decode():
    assert decode_value(encode_value(2, 17)) == (2, 17)
    assert encode_value(0, 5) == b"p0-00000005"
    assert decode_value(b"p0-5") is None and decode_value(b"hello") is None and decode_value(None) is None


def test_a_complete_log_passes_and_unacknowledged_records_are_allowed_once():
    records = [log_of(0, [0, 1, 2, 3]), log_of(1, [0, 1, 2])]
    acked = [acked_at([0, 1, 2]), acked_at([0, 1])]  # seq 3 of p0 and seq 2 of p1 were never acked
    check = check_records(records, acked, sent=[4, 3])
    assert check.ok, check.violations
    assert (check.acked, check.read, check.unacked_present) == (5, 7, 2)


def test_a_lost_acknowledged_record_is_missing():
    check = check_records([log_of(0, [0, 2], 0)], [{0: 0, 1: 1, 2: 1}], sent=[3])
    assert check.missing == 1 and not check.ok
    assert "p0: 1 acknowledged record(s) missing, e.g. seq 1 (acked at offset 1)" in check.violations[0]


def test_duplicates_count_for_unacknowledged_records_too():
    check = check_records([log_of(0, [0, 1, 1, 2, 2])], [{0: 0, 1: 1}], sent=[3])
    assert check.duplicates == 2 and not check.ok


def test_records_out_of_sequence_order():
    check = check_records([log_of(0, [0, 2, 1])], [{0: 0, 2: 1, 1: 2}], sent=[3])
    assert check.out_of_order == 1 and not check.ok


def test_values_never_sent_or_on_the_wrong_partition_are_unexpected():
    records = [[(0, encode_value(0, 0)), (1, encode_value(1, 0)), (2, encode_value(0, 9)), (3, b"junk")]]
    check = check_records(records, [{0: 0}], sent=[1])
    assert check.unexpected == 3 and not check.ok


def test_an_acknowledged_record_found_at_another_offset_has_moved():
    check = check_records([log_of(0, [0, 1], first_offset=5)], [{0: 5, 1: 7}], sent=[2])
    assert check.moved == 1 and not check.ok
    # an offset the client did not report (-1) is not compared
    assert check_records([log_of(0, [0, 1])], [{0: 0, 1: -1}], sent=[2]).ok


def test_a_consumed_record_that_is_gone_from_the_log():
    consumed = [{0: encode_value(0, 0), 1: encode_value(0, 1)}]
    check = check_records([log_of(0, [0, 2])], [{0: 0}], sent=[3], consumed=consumed)
    assert check.consumed_then_lost == 1 and not check.ok


def test_the_round_plan_rotates_every_kind_over_every_target():
    plan = round_plan(10, ("a", "b"), ("leader", "controller"))
    assert plan[:4] == [("a", "leader"), ("a", "controller"), ("b", "leader"), ("b", "controller")]
    assert plan[4:8] == plan[:4] and len(plan) == 10
