"""Kafka Streams 4.4 word count instances (group.protocol=streams or classic) and the Admin API, from Python.

    app = WordCountApp.create(bootstrap, work_dir, protocol="streams")   # topics made, Java compiled
    expected = produce_sentences(bootstrap, app.input, 3000, seed=1)
    app.start("a"); app.start("b"); app.start("c")
    app.wait_stable({"a", "b", "c"})          # every task active on exactly one RUNNING instance
    app.kill("b")                             # SIGKILL
    counts = read_counts(bootstrap, app.output, expected)   # read_committed, until exact or timeout
    admin(bootstrap, f"describe:{app.app_id}")              # StreamsGroupAdmin.java, JSON per command

Each instance is one JVM (java/StreamsWordCount.java, small-JVM flags) whose stdout is a log of JSON
lines: its state changes and the tasks it holds, read back here (`Instance.events`). Kafka's
behaviour is the reference: the same code runs against a real Kafka 4.4 broker and kafkapy.
"""
from __future__ import annotations

import collections
import json
import os
import random
import re
import signal
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import pytest

from conformance.kafka_apps.kafka_jars import KafkaDist, compile_java, stop_process, unavailable

__all__ = ["WordCountApp", "Instance", "admin", "produce_sentences", "read_counts", "STREAMS_BROKER_CONFIG",
           "streams_groups_tool", "task_ids", "unavailable", "normalize", "member_ids"]

JAVA = Path(__file__).resolve().parent / "java"
INPUT_PARTITIONS = 6
# Two subtopologies (the source's and the repartition topic's), one task per partition each.
TASKS = frozenset(f"{sub}_{p}" for sub in (0, 1) for p in range(INPUT_PARTITIONS))
WORDS = [f"w{i:02d}" for i in range(24)]

# The broker side of a streams group's timing: a SIGKILLed member leaves after 10 s instead of 45 s
# (Kafka's default and minimum), heartbeats every second. Kafka names; both brokers get them.
STREAMS_BROKER_CONFIG = {
    "group.streams.session.timeout.ms": "10000",
    "group.streams.min.session.timeout.ms": "6000",
    "group.streams.heartbeat.interval.ms": "1000",
    "group.streams.min.heartbeat.interval.ms": "1000",
}


def task_ids(tasks: Iterable[str]) -> list[str]:
    return sorted(tasks, key=lambda t: tuple(int(x) for x in t.split("_")))


@dataclass
class Instance:
    """One StreamsWordCount JVM and the JSON lines it printed."""

    name: str
    proc: subprocess.Popen
    log: Path
    killed: bool = False

    def events(self) -> list[dict]:
        out = []
        for line in self.log.read_text(errors="replace").splitlines():
            if line.startswith("{\"event\""):
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
        return out

    def state(self) -> str | None:
        states = [e["state"] for e in self.events() if e["event"] == "state"]
        return states[-1] if states else None

    def tasks(self) -> tuple[frozenset[str], frozenset[str]]:
        """The (active, standby) tasks it printed last."""
        last = [e for e in self.events() if e["event"] == "tasks"]
        if not last:
            return frozenset(), frozenset()
        return frozenset(last[-1]["active"]), frozenset(last[-1]["standby"])

    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self, chars: int = 4000) -> str:
        return f"----- instance {self.name} ({self.log}) -----\n" + self.log.read_text(errors="replace")[-chars:]


@dataclass
class WordCountApp:
    """The instances of one word count application (one application.id) against one broker."""

    bootstrap: str
    work_dir: Path
    protocol: str
    app_id: str
    input: str
    output: str
    dist: KafkaDist
    cp: str
    instances: dict[str, Instance] = field(default_factory=dict)

    @classmethod
    def create(cls, bootstrap: str, work_dir: Path, *, protocol: str = "streams",
               partitions: int = INPUT_PARTITIONS) -> "WordCountApp":
        """Compile the Java program (cached) and create the input and output topics."""
        from confluent_kafka.admin import AdminClient, NewTopic

        dist = KafkaDist.get("4.4")
        cp = dist.streams_classpath()
        classes = compile_java(str(JAVA / "StreamsWordCount.java"), cp)
        suffix = uuid.uuid4().hex[:8]
        app = cls(bootstrap=bootstrap, work_dir=Path(work_dir), protocol=protocol, app_id=f"wordcount-{suffix}",
                  input=f"sentences-{suffix}", output=f"word-counts-{suffix}", dist=dist,
                  cp=f"{classes}{os.pathsep}{cp}")
        client = AdminClient({"bootstrap.servers": bootstrap})
        for future in client.create_topics([NewTopic(app.input, partitions, 1),
                                            NewTopic(app.output, partitions, 1)]).values():
            future.result(30)
        return app

    def start(self, name: str) -> Instance:
        log = self.work_dir / f"instance-{name}.log"
        proc = self.dist.java_process(self.cp, "StreamsWordCount", self.bootstrap, self.app_id, self.input,
                                      self.output, str(self.work_dir / f"state-{name}"), name, self.protocol,
                                      log_path=log)
        self.instances[name] = Instance(name, proc, log)
        return self.instances[name]

    def kill(self, name: str) -> None:
        """SIGKILL the instance's JVM: no shutdown hook, no leave-group, an open transaction left behind."""
        inst = self.instances[name]
        os.killpg(inst.proc.pid, signal.SIGKILL)
        inst.proc.wait(10)
        inst.killed = True

    def live(self) -> dict[str, Instance]:
        return {n: i for n, i in self.instances.items() if not i.killed}

    def stop_all(self) -> None:
        threads = [threading.Thread(target=stop_process, args=(i.proc,)) for i in self.instances.values()]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def check_alive(self) -> None:
        for inst in self.live().values():
            if not inst.alive():
                pytest.fail(f"instance {inst.name} exited {inst.proc.returncode}\n{self.tails()}", pytrace=False)

    def stable(self, names: Iterable[str], tasks: frozenset[str] = TASKS,
               standbys: int = 0) -> dict[str, tuple[list[str], list[str]]] | None:
        """{name: (active, standby)} when every named instance is RUNNING, they hold every task once
        and `standbys` standby tasks in all (never on the instance that has the same task active)."""
        seen: dict[str, tuple[frozenset[str], frozenset[str]]] = {}
        for name in names:
            inst = self.instances[name]
            if inst.state() != "RUNNING":
                return None
            seen[name] = inst.tasks()
        actives = [t for active, _ in seen.values() for t in active]
        if sorted(actives) != sorted(tasks):
            return None
        if sum(len(s) for _, s in seen.values()) != standbys or any(a & s for a, s in seen.values()):
            return None
        return {n: (task_ids(a), task_ids(s)) for n, (a, s) in seen.items()}

    def wait_stable(self, names: Iterable[str], timeout: float = 90.0, settle: float = 1.0, standbys: int = 0) -> dict:
        """Wait until `stable(names)` holds and stays the same for `settle` seconds; return it."""
        names = list(names)
        deadline = time.monotonic() + timeout
        previous, since = None, 0.0
        while time.monotonic() < deadline:
            self.check_alive()
            now = self.stable(names, standbys=standbys)
            if now is not None and now == previous:
                if time.monotonic() - since >= settle:
                    return now
            else:
                previous, since = now, time.monotonic()
            time.sleep(0.2)
        states = {n: (self.instances[n].state(), self.instances[n].tasks()) for n in names}
        pytest.fail(f"no stable assignment over {names} within {timeout:.0f} s: {states}\n{self.tails()}",
                    pytrace=False)

    def tails(self) -> str:
        return "\n".join(i.tail() for i in self.instances.values())


def produce_sentences(bootstrap: str, topic: str, count: int, *, seed: int, rate: float | None = None,
                      expected: collections.Counter | None = None) -> collections.Counter:
    """Produce `count` keyed sentences (idempotent producer); the word counts they add to `expected`."""
    from confluent_kafka import Producer

    rng = random.Random(seed)
    expected = collections.Counter() if expected is None else expected
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    begin = time.monotonic()
    for i in range(count):
        words = [rng.choice(WORDS) for _ in range(rng.randint(1, 8))]
        producer.produce(topic, key=f"s{seed}-{i}", value=" ".join(words))
        producer.poll(0)
        expected.update(words)
        if rate is not None and i % 50 == 49:
            ahead = (i + 1) / rate - (time.monotonic() - begin)
            if ahead > 0:
                time.sleep(ahead)
    assert producer.flush(30) == 0, "the idempotent producer could not deliver every sentence"
    return expected


def read_counts(bootstrap: str, topic: str, expected: collections.Counter, timeout: float = 90.0,
                alive=lambda: None) -> tuple[dict[str, int], list[str]]:
    """Read `topic` read_committed from the start until each word's last count equals `expected`.

    Returns (last count per word, problems): a word whose committed counts do not strictly increase
    shows a count written twice (not exactly once).
    """
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:8]}",
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                         "enable.auto.commit": False})
    latest: dict[str, int] = {}
    problems: list[str] = []
    target = dict(expected)
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + timeout
        while latest != target and time.monotonic() < deadline:
            alive()
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            word = message.key().decode()
            count = int.from_bytes(message.value(), "big", signed=True)
            if word in latest and count <= latest[word]:
                problems.append(f"{word}: {count} after {latest[word]} (partition {message.partition()} "
                                f"offset {message.offset()})")
            latest[word] = count
    finally:
        consumer.close()
    return latest, problems


def admin(bootstrap: str, *commands: str, timeout: float = 90.0) -> list[dict]:
    """Run StreamsGroupAdmin.java's commands (one JVM); one parsed JSON answer per command."""
    dist = KafkaDist.get("4.4")
    cp = dist.streams_classpath()
    classes = compile_java(str(JAVA / "StreamsGroupAdmin.java"), cp)
    argv = dist.command(f"{classes}{os.pathsep}{cp}", "StreamsGroupAdmin", bootstrap, *commands)
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as expired:
        pytest.fail(f"StreamsGroupAdmin {commands} did not finish within {timeout:.0f} s: {expired.stderr!r}"[-4000:],
                    pytrace=False)
    answers = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or len(answers) != len(commands):
        pytest.fail(f"StreamsGroupAdmin {commands} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n"
                    f"{proc.stderr[-3000:]}", pytrace=False)
    return answers


def streams_groups_tool(bootstrap: str, *runs: tuple[str, ...]):
    """kafka-streams-groups.sh (4.4) invocations, in one JVM: [ToolRun] (rc, out, err)."""
    return KafkaDist.get("4.4").run_tools([("streams-groups", "--bootstrap-server", bootstrap, *args)
                                           for args in runs])


def member_ids(bootstrap: str, group: str) -> set[str]:
    described = admin(bootstrap, f"describe:{group}")[0]
    return {m["memberId"] for m in described.get("members", [])}


def normalize(text: str, app: WordCountApp, ids: set[str]) -> str:
    """The tool's text with what differs by run (names, member and process ids, hosts, spacing) blanked;
    the rows under a header sorted (the tool prints partitions in hash order)."""
    text = text.replace(app.app_id, "<app>").replace(app.input, "<input>").replace(app.output, "<output>")
    for member_id in ids:
        text = text.replace(member_id, "<member>")
    text = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<process>", text)
    text = re.sub(r"/?127\.0\.0\.1(:\d+)?", "<host>", text)
    lines = [" ".join(line.split()) for line in text.strip().splitlines()]
    blocks, block = [], []
    for line in lines + [""]:
        if line.startswith("GROUP ") or not line:
            blocks.append(block[:1] + sorted(block[1:]))
            block = [line] if line else []
        else:
            block.append(line)
    return "\n".join(line for b in blocks for line in b)
