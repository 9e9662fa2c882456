"""Consumers of either group protocol (KIP-848 "consumer" or "classic") for the consumer-group
tests (test_consumer_groups_*.py), and the checks those tests make on what they report; no tests here.

Every consumer runs in its own process, as an application would: the Java client
(conformance/java/ProtocolConsumer.java, kafka-clients 3.9.1) or confluent-kafka (librdkafka),
the latter through this file:

    python conformance/consumer_group_clients.py consume --bootstrap H:P --group G --topic T \\
        --out FILE --stop-file F [--protocol consumer|classic] [--assignor A] [--instance-id I]

Both write the event lines of conformance/test_groups_tools.py (`A p`, `V p`, `R p offset value`,
`G gen`, `CLOSED`), so its `ConsumerProcess` and `Consumption` read them, plus wall-clock times:
`S t` at start, `A p t` / `V p t` / `V p t lost` (t in microseconds since the epoch, taken when
the client's rebalance callback starts) and `C t` once close() returned. Those times let
`ownership_overlaps` check that no partition was owned by two members at once: a member writes
its revocation before its client acknowledges it to the coordinator, and the coordinator hands
the partition to the next owner only after that acknowledgement, so on one machine's realtime
clock the next owner's `A` is never earlier than the previous owner's `V`.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from conformance.test_groups_tools import CommitMonitor, ConsumerProcess, EventLog, keep_running  # noqa: E402

# Broker settings that make consumer-protocol groups react within seconds instead of Kafka's
# 5 s heartbeats and 45 s sessions: 1 s heartbeats, a 10 s session. Both protocols enabled
# (Kafka 4.0's default "classic,consumer").
CONSUMER_PROTOCOL_OVERRIDES = {
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "10",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "group.coordinator.rebalance.protocols": "classic,consumer",
    "group.consumer.heartbeat.interval.ms": "1000",
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.session.timeout.ms": "10000",
    "group.consumer.min.session.timeout.ms": "1000",
}


def now_us() -> int:
    return time.time_ns() // 1000


# -- building consumer processes ------------------------------------------------------------
def confluent_member(bootstrap: str, group: str, topic: str, work: Path, name: str, protocol: str = "consumer",
                     assignor: str | None = None, instance_id: str | None = None) -> ConsumerProcess:
    """A confluent-kafka consumer process (group.protocol=PROTOCOL); start() it."""
    out, stop_file = work / f"{name}.events", work / f"{name}.stop"
    argv = [sys.executable, str(Path(__file__).resolve()), "consume", "--bootstrap", bootstrap, "--group", group,
            "--topic", topic, "--out", str(out), "--stop-file", str(stop_file), "--protocol", protocol,
            "--client-id", name]
    if assignor:
        argv += ["--assignor", assignor]
    if instance_id:
        argv += ["--instance-id", instance_id]
    return ConsumerProcess(name, argv, out, stop_file)


def java_member(programs, bootstrap: str, group: str, topic: str, work: Path, name: str, protocol: str = "consumer",
                assignor: str | None = None, instance_id: str | None = None) -> ConsumerProcess:
    """A kafka-clients 3.9.1 consumer process (ProtocolConsumer); `programs` is the java_programs fixture."""
    from conformance.java.test_java_clients import JVM_OPTIONS

    out, stop_file = work / f"{name}.events", work / f"{name}.stop"
    argv = [programs.java, *JVM_OPTIONS, "-cp", f"{programs.classes_dir}{os.pathsep}{programs.classpath}",
            "ProtocolConsumer", bootstrap, group, topic, str(out), str(stop_file), protocol, assignor or "-",
            instance_id or "-", name]
    return ConsumerProcess(name, argv, out, stop_file)


def kill_member(member: ConsumerProcess) -> int:
    """SIGKILL a consumer process (no leave, no commit); returns the kill time in microseconds."""
    killed_at = now_us()
    if member.proc is not None and member.proc.poll() is None:
        os.killpg(member.proc.pid, signal.SIGKILL)
        member.proc.wait(10)
    return killed_at


def stop_members(members: list[ConsumerProcess], timeout: float = 40) -> None:
    """Ask every running member to close, then wait for each (killing what does not exit)."""
    for member in members:
        if member.proc is not None and member.proc.poll() is None:
            member.stop()
    for member in members:
        if member.proc is not None and member.proc.poll() is None:
            try:
                member.wait(timeout)
            except AssertionError:
                pass  # wait() killed it; the test's own checks report the missing CLOSED


# -- what the members reported --------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Ownership:
    """One member's ownership of one partition, [start_us, end_us]."""

    member: str
    partition: int
    start_us: int
    end_us: int | None  # None: still owned when the member was last seen (and it never closed)
    end: str  # "revoked", "lost", "closed", "killed" or "open"


def ownerships(member: ConsumerProcess, killed_at_us: int | None = None) -> list[Ownership]:
    """Every ownership interval a member reported; an interval left open ends at close or kill."""
    found: list[Ownership] = []
    since: dict[int, int] = {}
    closed_at: int | None = None
    for event in member.events():
        if event[0] == "A" and len(event) >= 3:
            since.setdefault(int(event[1]), int(event[2]))
        elif event[0] == "V" and len(event) >= 3:
            partition = int(event[1])
            if partition in since:
                kind = "lost" if len(event) > 3 and event[3] == "lost" else "revoked"
                found.append(Ownership(member.name, partition, since.pop(partition), int(event[2]), kind))
        elif event[0] == "C":
            closed_at = int(event[1])
    for partition, start in since.items():
        if killed_at_us is not None:
            found.append(Ownership(member.name, partition, start, killed_at_us, "killed"))
        elif closed_at is not None:
            found.append(Ownership(member.name, partition, start, closed_at, "closed"))
        else:
            found.append(Ownership(member.name, partition, start, None, "open"))
    return found


def ownership_overlaps(members: list[ConsumerProcess], killed_at_us: dict[str, int] | None = None) -> list[str]:
    """Pairs of intervals in which two members owned one partition at the same time.

    Equal times are not an overlap (Java's clock has microsecond resolution here, and the
    order revoke -> acknowledge -> assign is causal).
    """
    killed_at_us = killed_at_us or {}
    by_partition: dict[int, list[Ownership]] = {}
    for member in members:
        for owned in ownerships(member, killed_at_us.get(member.name)):
            by_partition.setdefault(owned.partition, []).append(owned)
    problems = []
    for partition, owned in sorted(by_partition.items()):
        owned.sort(key=lambda o: o.start_us)
        latest: Ownership | None = None  # the interval reaching furthest so far
        for current in owned:
            if latest is not None and (latest.end_us is None or current.start_us < latest.end_us):
                overlap_ms = ((latest.end_us or current.start_us) - current.start_us) / 1000
                problems.append(f"partition {partition}: {current.member} assigned at {current.start_us} while"
                                f" {latest.member} owned it until {latest.end_us} ({latest.end}; overlap"
                                f" {overlap_ms:.1f} ms)")
            if latest is None or latest.end_us is not None and (current.end_us is None
                                                                 or current.end_us > latest.end_us):
                latest = current
    return problems


def unique(prefix: str) -> str:
    """A topic or group name unique to this run."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def settled(members: list[ConsumerProcess], partitions: int) -> bool:
    """Every partition owned, by exactly one of `members`, and every member owns one."""
    owned = [m.assigned() for m in members]
    return all(owned) and sum(map(len, owned)) == partitions and len(set().union(*owned)) == partitions


def first_offsets(member: ConsumerProcess) -> dict[int, int]:
    """The first offset the member read from each partition."""
    first: dict[int, int] = {}
    for event in member.events():
        if event[0] == "R":
            first.setdefault(int(event[1]), int(event[2]))
    return first


def assigned_at(member: ConsumerProcess, partitions: set[int], after_us: int) -> int | None:
    """When (µs) the member had been assigned every partition in `partitions` at or after `after_us`."""
    pending = set(partitions)
    for event in member.events():
        if event[0] == "A" and len(event) >= 3 and int(event[2]) >= after_us:
            pending.discard(int(event[1]))
            if not pending:
                return int(event[2])
    return None


# -- ConsumerGroupDescribe through kafkapy's own protocol layer ------------------------------
def describe_consumer_group(bootstrap: str, group: str, version: int = 0):
    """The group's ConsumerGroupDescribe entry (api 69), asked of `bootstrap` (its coordinator)."""
    from kafkapy.net.client import BrokerConnection
    from kafkapy.protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest

    async def ask():
        host, port = bootstrap.rsplit(":", 1)
        connection = BrokerConnection(host, int(port), client_id="kafkapy-conformance", request_timeout_s=10)
        try:
            return await connection.send(ConsumerGroupDescribeRequest(group_ids=[group]), version)
        finally:
            connection.close()

    return asyncio.run(ask()).groups[0]


def fetch_committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offsets (OffsetFetch v7, admin form) through kafkapy's protocol layer;
    -1 where none. Raises on a connection failure or a group-level error."""
    from kafkapy.net.client import BrokerConnection
    from kafkapy.protocol.messages.offset_fetch import OffsetFetchRequest

    async def ask():
        host, port = bootstrap.rsplit(":", 1)
        connection = BrokerConnection(host, int(port), client_id="kafkapy-conformance", request_timeout_s=10)
        try:
            request = OffsetFetchRequest(group_id=group, topics=[OffsetFetchRequest.OffsetFetchRequestTopic(
                name=topic, partition_indexes=list(range(partitions)))], require_stable=False)
            return await connection.send(request, 7)
        finally:
            connection.close()

    response = asyncio.run(ask())
    if response.error_code:
        raise RuntimeError(f"OffsetFetch error {response.error_code}")
    return {p.partition_index: p.committed_offset for t in response.topics for p in t.partitions
            if p.error_code == 0}


class WireCommitMonitor(CommitMonitor):
    """CommitMonitor with kafkapy's own client: unlike librdkafka's AdminClient it cannot abort the
    test process when the broker is killed under it (librdkafka 2.16 once died on
    `rd_kafka_enq_once_del_source_return: eonce->refcnt > 0` in a broker-kill campaign)."""

    def _sampler(self):
        return lambda: fetch_committed(self.bootstrap, self.group, self.topic, self.partitions)


# -- the confluent-kafka consumer process itself ----------------------------------------------
def _consume_confluent(args, events: EventLog) -> None:
    from confluent_kafka import Consumer

    def callback(kind: str, suffix: str = ""):
        def write(consumer, partitions) -> None:
            t = now_us()
            for tp in partitions:
                events.write(f"{kind} {tp.partition} {t}{suffix}")
            events.flush()
        return write

    config = {"bootstrap.servers": args.bootstrap, "group.id": args.group, "client.id": args.client_id,
              "group.protocol": args.protocol, "auto.offset.reset": "earliest", "enable.auto.commit": True,
              "auto.commit.interval.ms": 1000, "fetch.wait.max.ms": 200}
    if args.protocol == "consumer":
        if args.assignor:
            config["group.remote.assignor"] = args.assignor
    else:
        config.update({"session.timeout.ms": 10_000, "heartbeat.interval.ms": 1000,
                       "partition.assignment.strategy": args.assignor or "range"})
    if args.instance_id:
        config["group.instance.id"] = args.instance_id
    events.write(f"S {now_us()}")
    consumer = Consumer(config)
    consumer.subscribe([args.topic], on_assign=callback("A"), on_revoke=callback("V"),
                       on_lost=callback("V", " lost"))
    while keep_running(args):
        for msg in consumer.consume(1000, timeout=0.2):
            if msg.error() is not None:
                events.write(f"E {msg.error()}")
                continue
            events.write(f"R {msg.partition()} {msg.offset()} {msg.value().decode()}")
        events.flush()
    consumer.close()
    events.write(f"C {now_us()}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    consume = sub.add_parser("consume", help="a confluent-kafka group member writing events")
    consume.add_argument("--bootstrap", required=True)
    consume.add_argument("--group", required=True)
    consume.add_argument("--topic", required=True)
    consume.add_argument("--out", required=True)
    consume.add_argument("--stop-file", required=True)
    consume.add_argument("--protocol", choices=["consumer", "classic"], default="consumer")
    consume.add_argument("--assignor", default=None)
    consume.add_argument("--instance-id", default=None)
    consume.add_argument("--client-id", default=f"confluent-{uuid.uuid4().hex[:6]}")
    args = parser.parse_args(argv)
    args.parent_pid = os.getppid()
    events = EventLog(args.out)
    _consume_confluent(args, events)
    events.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
