"""Share groups (KIP-932) with confluent-kafka's ShareConsumer (librdkafka 2.16) against a real
kafkapy broker: records spread over members sharing one partition, each delivered once when
nothing fails, RELEASE / REJECT / ACCEPT, the acquisition lock of a SIGKILLed member expiring,
and the delivery count limit archiving a record (docs/share-groups.md).

One broker for the module, with a 2 s acquisition lock (group.share.record.lock.duration.ms) and
a delivery count limit of 3 so the lock and limit cases take seconds; every test has its own
topic and group, whose share.auto.offset.reset is set to earliest through IncrementalAlterConfigs
on the GROUP resource. And the share state in __share_group_state across a SIGKILL of the
broker: acknowledged records are not delivered again, held ones come back with their counts.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
if not hasattr(confluent_kafka, "ShareConsumer"):
    pytest.skip("confluent-kafka without ShareConsumer (2.15+ needed)", allow_module_level=True)

from confluent_kafka import AcknowledgeType, Producer, ShareConsumer  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from conformance.broker_process import start_broker  # noqa: E402

pytestmark = pytest.mark.timeout(120)

LOCK_MS = 2000
DELIVERY_LIMIT = 3
OVERRIDES = {
    "offsets.topic.replication.factor": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.num.partitions": "3",
    "group.share.record.lock.duration.ms": str(LOCK_MS),
    "group.share.delivery.count.limit": str(DELIVERY_LIMIT),
}


@pytest.fixture(scope="module")
def share_broker():
    with start_broker(overrides=OVERRIDES) as broker:
        yield broker


def _setup(bootstrap: str, topic: str, group: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(15)
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(15)


def _produce(bootstrap: str, topic: str, values: list[bytes], flush_each: bool = False) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for value in values:
        producer.produce(topic, value=value)
        if flush_each:
            producer.flush(10)
    assert producer.flush(15) == 0


def _consumer(bootstrap: str, group: str, topic: str, **conf) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, **conf})
    consumer.subscribe([topic])
    return consumer


def _poll(consumer: ShareConsumer, timeout: float = 0.5) -> list:
    out = []
    for message in consumer.poll(timeout) or []:
        assert message.error() is None, message.error()
        out.append(message)
    return out


def _poll_until(consumer: ShareConsumer, want: int, deadline_s: float) -> list:
    got = []
    deadline = time.monotonic() + deadline_s
    while len(got) < want and time.monotonic() < deadline:
        got += _poll(consumer)
    return got


def test_three_members_share_one_partition_and_each_record_is_delivered_once(share_broker, topic_name):
    bootstrap, group = share_broker.bootstrap, f"{topic_name}-g"
    _setup(bootstrap, topic_name, group)
    members = [_consumer(bootstrap, group, topic_name, **{"max.poll.records": 5}) for _ in range(3)]
    try:
        for member in members:
            _poll(member, 0.2)  # join before anything is produced
        values = [b"r%03d" % i for i in range(90)]
        _produce(bootstrap, topic_name, values, flush_each=True)
        seen: dict[int, list] = {i: [] for i in range(3)}
        deadline = time.monotonic() + 45
        while sum(len(v) for v in seen.values()) < len(values) and time.monotonic() < deadline:
            for i, member in enumerate(members):
                seen[i] += [(m.offset(), m.value(), m.delivery_count()) for m in _poll(member, 0.1)]
        everything = [record for records in seen.values() for record in records]
        assert sorted(v for _, v, _ in everything) == values            # each once, none lost
        assert len({offset for offset, _, _ in everything}) == len(values)
        assert all(count == 1 for _, _, count in everything)
        assert all(seen[i] for i in range(3)), {i: len(v) for i, v in seen.items()}  # all three got some
    finally:
        for member in members:
            member.close()


def test_release_redelivers_with_delivery_count_2_and_accept_ends_it(share_broker, topic_name):
    bootstrap, group = share_broker.bootstrap, f"{topic_name}-g"
    _setup(bootstrap, topic_name, group)
    _produce(bootstrap, topic_name, [b"only"])
    consumer = _consumer(bootstrap, group, topic_name, **{"share.acknowledgement.mode": "explicit"})
    try:
        first = _poll_until(consumer, 1, 20)
        assert [(m.offset(), m.delivery_count()) for m in first] == [(0, 1)]
        consumer.acknowledge(first[0], AcknowledgeType.RELEASE)
        consumer.commit_sync(10)
        again = _poll_until(consumer, 1, 20)
        assert [(m.offset(), m.value(), m.delivery_count()) for m in again] == [(0, b"only", 2)]
        consumer.acknowledge(again[0], AcknowledgeType.ACCEPT)
        consumer.commit_sync(10)
        # accepted: never again, not even after the lock duration
        assert _poll_until(consumer, 1, (LOCK_MS / 1000) + 2) == []
    finally:
        consumer.close()


def test_reject_and_accept_do_not_redeliver(share_broker, topic_name):
    bootstrap, group = share_broker.bootstrap, f"{topic_name}-g"
    _setup(bootstrap, topic_name, group)
    _produce(bootstrap, topic_name, [b"a", b"b", b"c"])
    consumer = _consumer(bootstrap, group, topic_name, **{"share.acknowledgement.mode": "explicit"})
    try:
        got = _poll_until(consumer, 3, 20)
        assert sorted(m.offset() for m in got) == [0, 1, 2]
        for message in got:
            kind = AcknowledgeType.REJECT if message.value() == b"b" else AcknowledgeType.ACCEPT
            consumer.acknowledge(message, kind)
        consumer.commit_sync(10)
        assert _poll_until(consumer, 1, (LOCK_MS / 1000) + 2) == []
        _produce(bootstrap, topic_name, [b"d"])  # the group goes on after them
        assert [(m.offset(), m.delivery_count()) for m in _poll_until(consumer, 1, 20)] == [(3, 1)]
    finally:
        consumer.close()


HOLDER = textwrap.dedent("""
    import sys, time
    from confluent_kafka import ShareConsumer
    bootstrap, group, topic = sys.argv[1:4]
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                       "share.acknowledgement.mode": "explicit"})
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + 30
    while not got and time.monotonic() < deadline:
        got = [m for m in (c.poll(0.5) or []) if m.error() is None]
    print(" ".join(str(m.offset()) for m in got), flush=True)
    time.sleep(120)  # holds the records until it is killed
""")


def _holder_and_other(bootstrap: str, group: str, topic: str, sig: int) -> tuple[list, float]:
    """A member (a child process) acquires the 5 records and holds them; it gets `sig`, another member
    polls. (offset, delivery count) of what the other got, and the seconds from the signal until it had
    them all."""
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, bootstrap, group, topic],
                              stdout=subprocess.PIPE, text=True, env=dict(os.environ))
    other = None
    try:
        line = holder.stdout.readline().split()
        assert sorted(int(o) for o in line) == [0, 1, 2, 3, 4], line
        other = _consumer(bootstrap, group, topic)
        holder.send_signal(sig)
        signalled_at = time.monotonic()
        got = _poll_until(other, 5, 20)
        return sorted((m.offset(), m.delivery_count()) for m in got), time.monotonic() - signalled_at
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(10)
        holder.stdout.close()
        if other is not None:
            other.close()


def test_sigkilled_member_loses_its_records_to_another_when_its_connection_closes(share_broker, topic_name):
    # Kafka's ShareSessionCache ends the share session with its connection (the kernel closes a killed
    # process's sockets): the records come back at once, not when their locks expire
    bootstrap, group = share_broker.bootstrap, f"{topic_name}-g"
    _setup(bootstrap, topic_name, group)
    _produce(bootstrap, topic_name, [b"x%d" % i for i in range(5)])
    got, _ = _holder_and_other(bootstrap, group, topic_name, signal.SIGKILL)
    assert got == [(o, 2) for o in range(5)]


def test_paused_member_loses_its_records_to_another_once_the_lock_expires(share_broker, topic_name):
    # a stopped member keeps its connection: its records come back when their locks expire
    bootstrap, group = share_broker.bootstrap, f"{topic_name}-g"
    _setup(bootstrap, topic_name, group)
    _produce(bootstrap, topic_name, [b"x%d" % i for i in range(5)])
    got, waited = _holder_and_other(bootstrap, group, topic_name, signal.SIGSTOP)
    assert got == [(o, 2) for o in range(5)]
    assert waited > 0.5  # not before the lock could have expired


def test_delivery_count_limit_archives_a_record_that_keeps_being_released(share_broker, topic_name):
    bootstrap, group = share_broker.bootstrap, f"{topic_name}-g"
    _setup(bootstrap, topic_name, group)
    _produce(bootstrap, topic_name, [b"poison", b"fine"])
    consumer = _consumer(bootstrap, group, topic_name, **{"share.acknowledgement.mode": "explicit"})
    try:
        counts = []
        deadline = time.monotonic() + 40
        accepted = False
        while time.monotonic() < deadline:
            got = _poll(consumer)
            for message in got:
                if message.value() == b"poison":
                    counts.append(message.delivery_count())
                    consumer.acknowledge(message, AcknowledgeType.RELEASE)
                else:
                    consumer.acknowledge(message, AcknowledgeType.ACCEPT)
                    accepted = True
            if got:
                consumer.commit_sync(10)
            if len(counts) >= DELIVERY_LIMIT and accepted:
                break
        assert counts == list(range(1, DELIVERY_LIMIT + 1))
        # archived: no fourth delivery
        assert _poll_until(consumer, 1, (LOCK_MS / 1000) + 2) == []
    finally:
        consumer.close()


def test_read_committed_never_delivers_aborted_transactions(share_broker, topic_name):
    bootstrap, group = share_broker.bootstrap, f"{topic_name}-g"
    _setup(bootstrap, topic_name, group)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.isolation.level", "read_committed", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(15)
    described = admin.describe_configs([ConfigResource(ResourceType.GROUP, group)])
    configs = next(iter(described.values())).result(15)
    assert configs["share.isolation.level"].value == "read_committed"
    assert configs["share.auto.offset.reset"].value == "earliest"
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic_name}-tx"})
    producer.init_transactions(15)
    producer.begin_transaction()
    for value in (b"aborted-1", b"aborted-2"):
        producer.produce(topic_name, value=value)
    producer.flush(15)
    producer.abort_transaction(15)
    producer.begin_transaction()
    for value in (b"committed-1", b"committed-2"):
        producer.produce(topic_name, value=value)
    producer.commit_transaction(15)
    consumer = _consumer(bootstrap, group, topic_name)
    try:
        got = _poll_until(consumer, 2, 20)
        got += _poll_until(consumer, 1, 2)  # nothing else turns up
        assert [m.value() for m in got] == [b"committed-1", b"committed-2"]
    finally:
        consumer.close()


RESTART_HOLDER = textwrap.dedent("""
    import sys, time
    from confluent_kafka import AcknowledgeType, ShareConsumer
    bootstrap, group, topic = sys.argv[1:4]
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                       "share.acknowledgement.mode": "explicit"})
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 6 and time.monotonic() < deadline:
        got += [m for m in (c.poll(0.5) or []) if m.error() is None]
    # accept 0, 1 and 4, release 5; 2 and 3 stay held (in flight) until this process is killed
    for m in got:
        if m.offset() in (0, 1, 4):
            c.acknowledge(m, AcknowledgeType.ACCEPT)
        elif m.offset() == 5:
            c.acknowledge(m, AcknowledgeType.RELEASE)
    c.commit_sync(10)
    print(" ".join(f"{m.offset()}:{m.delivery_count()}" for m in got), flush=True)
    time.sleep(120)
""")


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM], ids=["sigkill", "sigterm"])
def test_share_state_survives_a_broker_restart(broker_factory, topic_name, how):
    broker = broker_factory(OVERRIDES)
    bootstrap, group = broker.bootstrap, f"{topic_name}-g"
    _setup(bootstrap, topic_name, group)
    _produce(bootstrap, topic_name, [b"s%d" % i for i in range(6)])
    holder = subprocess.Popen([sys.executable, "-c", RESTART_HOLDER, bootstrap, group, topic_name],
                              stdout=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        line = holder.stdout.readline().split()
        assert sorted(line) == [f"{o}:1" for o in range(6)], line
        broker.restart(how)     # with 2 and 3 in flight
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(10)
        holder.stdout.close()
    # the group config was kept by the metadata store
    admin = AdminClient({"bootstrap.servers": bootstrap})
    described = admin.describe_configs([ConfigResource(ResourceType.GROUP, group)])
    assert next(iter(described.values())).result(15)["share.auto.offset.reset"].value == "earliest"
    after = _consumer(bootstrap, group, topic_name)
    try:
        got = _poll_until(after, 3, 30)
        got += _poll_until(after, 1, 2)  # and nothing else
        # 0, 1 and 4 were accepted: never again; 2, 3 (in flight) and 5 (released) were delivered once
        assert sorted((m.offset(), m.delivery_count()) for m in got) == [(2, 2), (3, 2), (5, 2)]
    finally:
        after.close()
