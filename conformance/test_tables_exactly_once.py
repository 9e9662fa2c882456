"""Topics as Iceberg tables, exactly once under SIGKILL (issue 34): an idempotent confluent-kafka
producer writes to a key_value table topic while the kafkapy process is SIGKILLed and restarted
several times, some kills landing between a commit's data files and its catalog update. At the end the
table holds every acknowledged record exactly once: one row per (partition, offset), every acked
offset present with its value, and kafkapy.next-offsets at the log end. The tables worker process
of each killed broker exits by itself (it watches its parent), so no two workers of one broker commit.
"""
from __future__ import annotations

import collections
import random
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("pyiceberg")
pytestmark = pytest.mark.timeout(240)

from confluent_kafka import Producer  # noqa: E402

from conformance.test_tables_core import (  # noqa: E402
    create_topic,
    log_end_offsets,
    open_table_catalog,
    table_rows,
    wait_for_table,
)

KILLS = 4
PARTITIONS = 3


def _children(pid: int) -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.add(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_every_acked_record_exactly_once_across_sigkills(broker_factory, topic_name):
    instance = broker_factory({"kafkapy.iceberg.commit.interval.ms": "300"})
    create_topic(instance.bootstrap, topic_name, PARTITIONS, {"kafkapy.iceberg.mode": "key_value"})
    acked: dict[tuple[int, int], bytes] = {}
    failed: list[str] = []
    stop = threading.Event()

    def on_delivery(err, msg):
        if err is not None:
            failed.append(str(err))
        else:
            acked[(msg.partition(), msg.offset())] = msg.value()

    def produce() -> None:
        producer = Producer({"bootstrap.servers": instance.bootstrap, "enable.idempotence": True,
                             "linger.ms": 5, "message.timeout.ms": 120000, "reconnect.backoff.max.ms": 500})
        i = 0
        while not stop.is_set():
            try:
                producer.produce(topic_name, value=b"record-%08d" % i, key=b"%d" % (i % 50), on_delivery=on_delivery)
                i += 1
            except BufferError:
                producer.poll(0.05)
                continue
            if i % 100 == 0:
                producer.poll(0)
                time.sleep(0.01)
        assert producer.flush(120) == 0

    writer = threading.Thread(target=produce, name="idempotent-producer")
    writer.start()
    rng = random.Random(34)
    workers_before: set[int] = set()
    try:
        for _ in range(KILLS):
            time.sleep(rng.uniform(1.0, 2.5))
            workers_before = _children(instance.pid)
            instance.kill9()
            time.sleep(rng.uniform(0.0, 0.5))
            instance.start()
        time.sleep(1.5)
    finally:
        stop.set()
        writer.join(150)
    assert not writer.is_alive()
    assert not failed, failed[:5]
    assert len(acked) > 500, "the producer wrote too little for the test to mean anything"
    # the last killed broker's worker exited by itself (parent watch)
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in workers_before) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(_alive(pid) for pid in workers_before), "a SIGKILLed broker's tables worker outlived it"

    ends = log_end_offsets(instance.bootstrap, topic_name, PARTITIONS)
    catalog = open_table_catalog(instance.data_dir)
    offsets = wait_for_table(catalog, topic_name, ends, timeout=90)
    assert offsets == ends
    rows = table_rows(catalog, topic_name)
    count = collections.Counter((row["kafka"]["partition"], row["kafka"]["offset"]) for row in rows)
    duplicates = {k: n for k, n in count.items() if n != 1}
    assert not duplicates, f"rows more than once: {list(duplicates.items())[:10]}"
    values = {(row["kafka"]["partition"], row["kafka"]["offset"]): row["value"] for row in rows}
    missing = [k for k in acked if k not in values]
    assert not missing, f"{len(missing)} acked records missing from the table, e.g. {missing[:10]}"
    wrong = [k for k, v in acked.items() if values[k] != v]
    assert not wrong, f"rows with other values than acked: {wrong[:10]}"
    # every row is a record of the log (idempotent retries leave no duplicates in the log either)
    assert len(rows) == sum(ends.values())
    print(f"{len(acked)} acked records, {KILLS} SIGKILLs, {len(rows)} rows, next offsets {offsets}")
