"""The tables worker's own logic, in this process over a real pyiceberg SQL catalog in a temporary
directory: decoding a read_committed read as a consumer would (aborted transactions and control
batches left out, records below the start skipped, compressed batches), and the conditional
per-partition commit (the table moved by another leader: the buffer is dropped and the reader moved;
the table inside the buffered range: only the rows from its offset on are appended)."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("pyiceberg")

from kafkapy.protocol.control_records import build_control_batch  # noqa: E402
from kafkapy.protocol.records import build_batch  # noqa: E402
from kafkapy.tables import worker  # noqa: E402
from kafkapy.tables.catalog import NEXT_OFFSETS, CatalogSettings, next_offsets, open_catalog  # noqa: E402

TS = 1_700_000_000_000


def _batch(base: int, values: list[bytes], pid: int = -1, transactional: bool = False, compression: int = 0) -> bytes:
    return build_batch([(b"k%d" % (base + i), v, [("h", b"x")] if i == 0 else (), TS + base + i)
                        for i, v in enumerate(values)], base_offset=base, producer_id=pid,
                       producer_epoch=0 if pid >= 0 else -1, is_transactional=transactional, compression=compression)


def test_decode_committed_leaves_out_aborted_and_control_batches():
    data = b"".join([
        _batch(0, [b"a", b"b"]),
        _batch(2, [b"t1", b"t2"], pid=7, transactional=True),      # aborted below
        _batch(4, [b"c"], compression=3),                             # lz4
        _batch(5, [b"u1"], pid=8, transactional=True),              # committed
        build_control_batch("abort", 7, 0, 0, base_offset=6, timestamp=TS),
        build_control_batch("commit", 8, 0, 0, base_offset=7, timestamp=TS),
        _batch(8, [b"t3"], pid=7, transactional=True),              # producer 7's next transaction: committed
        build_control_batch("commit", 7, 0, 0, base_offset=9, timestamp=TS),
    ])
    records = worker.decode_committed(data, [(7, 2)], partition=3, start=1)
    assert records.partition == 3
    assert records.offsets == [1, 4, 5, 8]
    assert records.values == [b"b", b"c", b"u1", b"t3"]
    assert records.keys == [b"k1", b"k4", b"k5", b"k8"]
    assert records.timestamps_ms == [TS + 1, TS + 4, TS + 5, TS + 8]
    assert records.headers == [None, [("h", b"x")], [("h", b"x")], [("h", b"x")]]


@pytest.fixture
def catalog_dir(tmp_path, monkeypatch):
    settings = CatalogSettings(f"sqlite:///{tmp_path}/catalog.db", str(tmp_path / "warehouse"))
    monkeypatch.setattr(worker, "_settings", settings)
    monkeypatch.setattr(worker, "_catalog", None)
    monkeypatch.setattr(worker, "_buffers", {})
    return settings


def _opened(answer: dict) -> dict:
    assert set(answer) == {"position", "committed", "snapshot"}
    return {"position": answer["position"], "committed": answer["committed"]}


def _offsets_in_table(settings, topic):
    table = open_catalog(settings).load_table(("kafka", topic))
    rows = table.scan().to_arrow().to_pylist()
    return sorted(r["kafka"]["offset"] for r in rows), next_offsets(table)


def _commit_elsewhere(settings, topic, partition, next_offset, first, count):
    """Another leader's commit of `count` rows of `partition` from `first`, up to `next_offset`."""
    from kafkapy.tables.values import Records, key_value_rows

    table = open_catalog(settings).load_table(("kafka", topic))
    offsets = next_offsets(table)
    offsets[partition] = next_offset
    rows = key_value_rows(Records(partition, list(range(first, first + count)), [TS] * count, [None] * count,
                                  [b"other"] * count, [None] * count))
    table.append(rows, snapshot_properties={NEXT_OFFSETS: json.dumps({str(p): o for p, o in offsets.items()})})


def test_commit_is_conditional_per_partition(catalog_dir):
    topic = "orders"
    assert _opened(worker.open_partition(topic, 0, "key_value", 0)) == {"position": 0, "committed": None}
    assert _opened(worker.open_partition(topic, 1, "key_value", 0)) == {"position": 0, "committed": None}
    assert worker.add(topic, 0, 0, 3, _batch(0, [b"a", b"b", b"c"]), [])["records"] == 3
    assert worker.add(topic, 1, 0, 2, _batch(0, [b"x", b"y"]), [])["records"] == 2
    # a read that does not continue the buffer is answered with where to read
    assert worker.add(topic, 0, 5, 6, _batch(5, [b"z"]), []) == {"position": 3}
    result = worker.commit(topic)
    assert result["rows"] == 5
    assert result["partitions"] == {0: {"committed": 3, "moved": False}, 1: {"committed": 2, "moved": False}}
    assert _offsets_in_table(catalog_dir, topic) == ([0, 0, 1, 1, 2], {0: 3, 1: 2})

    # partition 0: another leader committed [3, 7) meanwhile; partition 1: another leader committed
    # [2, 3), inside this buffer's [2, 5)
    worker.add(topic, 0, 3, 6, _batch(3, [b"d", b"e", b"f"]), [])
    worker.add(topic, 1, 2, 5, _batch(2, [b"p", b"q", b"r"]), [])
    _commit_elsewhere(catalog_dir, topic, 0, 7, 3, 4)
    _commit_elsewhere(catalog_dir, topic, 1, 3, 2, 1)
    result = worker.commit(topic)
    assert result["partitions"] == {0: {"committed": 7, "moved": True}, 1: {"committed": 5, "moved": False}}
    offsets, table_next = _offsets_in_table(catalog_dir, topic)
    assert table_next == {0: 7, 1: 5}
    assert offsets == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 6]  # no offset twice in a partition
    # the moved partition reads on from the table's offset
    assert worker.add(topic, 0, 6, 7, _batch(6, [b"g"]), []) == {"position": 7}
    assert worker.add(topic, 0, 7, 8, _batch(7, [b"h"]), [])["records"] == 1
    # a table exactly at the buffer's end: nothing appended, nothing moved
    _commit_elsewhere(catalog_dir, topic, 0, 8, 7, 1)
    assert worker.commit(topic)["partitions"] == {0: {"committed": 8, "moved": False}}


def test_open_resumes_from_the_table(catalog_dir):
    topic = "resume"
    worker.open_partition(topic, 0, "key_value", 0)
    worker.add(topic, 0, 0, 4, _batch(0, [b"a", b"b", b"c", b"d"]), [])
    worker.commit(topic)
    assert _opened(worker.open_partition(topic, 0, "key_value", 0)) == {"position": 4, "committed": 4}
    # retention took the log past the table's offset: reading goes on at the log start
    assert _opened(worker.open_partition(topic, 0, "key_value", 10)) == {"position": 10, "committed": 4}
    worker.add(topic, 0, 10, 11, _batch(10, [b"k"]), [])
    worker.commit(topic)
    assert _offsets_in_table(catalog_dir, topic) == ([0, 1, 2, 3, 10], {0: 11})


def test_only_control_records_still_advance_the_offsets(catalog_dir):
    topic = "markers"
    worker.open_partition(topic, 0, "key_value", 0)
    data = _batch(0, [b"t"], pid=3, transactional=True) + build_control_batch("abort", 3, 0, 0, base_offset=1,
                                                                              timestamp=TS)
    assert worker.add(topic, 0, 0, 2, data, [(3, 0)])["records"] == 0
    worker.commit(topic)
    assert _offsets_in_table(catalog_dir, topic) == ([], {0: 2})


def test_a_commit_racing_another_keeps_both_offsets(catalog_dir, monkeypatch):
    """Another leader commits partition 0 between this worker's read of the table and its commit of
    partition 1: the commit fails (pyiceberg must not rebase it with the stale offsets map), and the
    worker's retry writes a map with both partitions' offsets."""
    topic = "race"
    worker.open_partition(topic, 0, "key_value", 0)
    worker.open_partition(topic, 1, "key_value", 0)
    worker.add(topic, 0, 0, 1, _batch(0, [b"a"]), [])
    worker.commit(topic)
    worker.close_partition(topic, 0)  # partition 0 is led elsewhere now
    worker.add(topic, 1, 0, 2, _batch(0, [b"x", b"y"]), [])
    load = worker._load
    raced = []

    def load_then_race(identifier):
        table = load(identifier)
        if not raced:
            raced.append(True)
            _commit_elsewhere(catalog_dir, topic, 0, 5, 1, 4)
        return table

    monkeypatch.setattr(worker, "_load", load_then_race)
    assert worker.commit(topic)["partitions"] == {1: {"committed": 2, "moved": False}}
    offsets, table_next = _offsets_in_table(catalog_dir, topic)
    assert table_next == {0: 5, 1: 2}
    assert offsets == [0, 0, 1, 1, 2, 3, 4]


def test_decode_committed_takes_message_format_v0_and_v1_messages():
    """kafkapy converts produced message sets to v2 on append, but a log an older broker wrote may
    hold v0/v1 messages (plain and compressed wrappers) between v2 batches: they are records too."""
    from kafkapy.protocol.legacy_records import build_message_set

    data = b"".join([
        build_message_set([(b"k0", b"v0"), (None, b"v1")], 0, base_offset=0),            # v0: no timestamp
        build_message_set([(b"k2", b"v2", TS + 2), (b"k3", None, TS + 3)], 1, base_offset=2, compression=1),
        _batch(4, [b"v4"]),
    ])
    assert worker.next_offset(data) == 5
    records = worker.decode_committed(data, [], partition=0, start=1)
    assert records.offsets == [1, 2, 3, 4]
    assert records.keys == [None, b"k2", b"k3", b"k4"]
    assert records.values == [b"v1", b"v2", None, b"v4"]
    assert records.timestamps_ms == [-1, TS + 2, TS + 3, TS + 4]
    assert records.headers == [None, None, None, [("h", b"x")]]


def test_a_v0_read_commits_to_the_table(catalog_dir):
    from kafkapy.protocol.legacy_records import build_message_set

    topic = "legacy"
    worker.open_partition(topic, 0, "key_value", 0)
    data = build_message_set([(b"a", b"1"), (b"b", b"2"), (None, b"3")], 0, base_offset=0, compression=2)
    assert worker.add(topic, 0, 0, worker.next_offset(data), data, [])["records"] == 3
    worker.commit(topic)
    assert _offsets_in_table(catalog_dir, topic) == ([0, 1, 2], {0: 3})
