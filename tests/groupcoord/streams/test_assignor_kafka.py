"""The streams task assignor against Kafka's own: the same inputs through Kafka 4.4.0's
StickyTaskAssignor (kafka-group-coordinator 4.4.0 from Maven Central, run in a JVM) give the same
active and standby tasks, member for member. Skips loudly without Java or Maven; fails instead
under KAFKAPY_REQUIRE_JAVA=1.
"""

from __future__ import annotations

import hashlib
import logging
import os
import random
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest

from kafkapy.groupcoord.streams.assignor import (
    GroupSpec,
    MemberSpec,
    TopologyDescription,
    assign,
    java_hash_map_order,
)

pytestmark = pytest.mark.timeout(300)

REQUIRE_ENV = "KAFKAPY_REQUIRE_JAVA"
ARTIFACTS = [
    "org.apache.kafka:kafka-group-coordinator:4.4.0",
    "org.apache.kafka:kafka-group-coordinator-api:4.4.0",
    "org.apache.kafka:kafka-clients:4.4.0",
    "org.slf4j:slf4j-nop:1.7.36",
]
JVM_OPTIONS = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx256m"]
CASES = 1000

# Reads cases on stdin, one line per fact; runs Kafka's assignor on each; prints the result.
#   CASE <standbys> / TOPO <sub> <tasks> <0|1 stateful> / MEMBER <id> <process> <active> <standby>
#   <offsets> / END, where tasks are "sub.p,..." and offsets "sub.p=offset,...".
#   MAP <capacity|-> <p|c> <key>...: the iteration order of a HashMap filled by put or computeIfAbsent.
_RUNNER_JAVA = r'''
import java.io.*;
import java.util.*;
import org.apache.kafka.coordinator.group.api.streams.assignor.*;
import org.apache.kafka.coordinator.group.streams.assignor.*;

public class StreamsAssignorRunner {
    static Map<String, Set<Integer>> tasks(String s) {
        Map<String, Set<Integer>> m = new HashMap<>();
        if (!s.isEmpty()) for (String t : s.split(",")) {
            String[] x = t.split("\\.");
            m.computeIfAbsent(x[0], k -> new HashSet<>()).add(Integer.parseInt(x[1]));
        }
        return m;
    }
    static Map<String, Map<Integer, Long>> offsets(String s) {
        Map<String, Map<Integer, Long>> m = new HashMap<>();
        if (!s.isEmpty()) for (String t : s.split(",")) {
            String[] x = t.split("[.=]");
            m.computeIfAbsent(x[0], k -> new HashMap<>()).put(Integer.parseInt(x[1]), Long.parseLong(x[2]));
        }
        return m;
    }
    static String text(Map<String, Set<Integer>> m) {
        StringBuilder b = new StringBuilder();
        for (var e : new TreeMap<>(m).entrySet()) for (int p : new TreeSet<>(e.getValue())) {
            if (b.length() > 0) b.append(',');
            b.append(e.getKey()).append('.').append(p);
        }
        return b.toString();
    }
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        StickyTaskAssignor assignor = new StickyTaskAssignor();
        int standbys = 0;
        List<String> subtopologies = new ArrayList<>();
        Map<String, Integer> sizes = new HashMap<>();
        Set<String> stateful = new HashSet<>();
        Map<String, MemberMetadataAndStateImpl> members = new HashMap<>();
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.split(" ", -1);
            switch (f[0]) {
                case "CASE" -> {
                    standbys = Integer.parseInt(f[1]);
                    subtopologies = new ArrayList<>(); sizes = new HashMap<>(); stateful = new HashSet<>();
                    members = new HashMap<>();
                }
                case "TOPO" -> {
                    subtopologies.add(f[1]); sizes.put(f[1], Integer.parseInt(f[2]));
                    if (f[3].equals("1")) stateful.add(f[1]);
                }
                case "MEMBER" -> members.put(f[1], new MemberMetadataAndStateImpl(Optional.empty(), Optional.empty(),
                    f[2], Map.of(), tasks(f[3]), tasks(f[4]), Map.of(), offsets(f[5]), Map.of()));
                case "END" -> {
                    final List<String> subs = subtopologies; final Map<String, Integer> n = sizes; final Set<String> st = stateful;
                    TopologyDescriber topology = new TopologyDescriber() {
                        public List<String> subtopologies() { return subs; }
                        public int maxNumInputPartitions(String s) { return n.get(s); }
                        public boolean isStateful(String s) { return st.contains(s); }
                    };
                    GroupAssignment result = assignor.assign(
                        new GroupSpecImpl(members, new AssignmentConfigsImpl(standbys, List.of())), topology);
                    for (var e : new TreeMap<>(result.members()).entrySet())
                        System.out.println("R " + e.getKey() + " " + text(e.getValue().activeTasks()) + " " + text(e.getValue().standbyTasks()));
                    System.out.println("DONE");
                }
                case "MAP" -> {
                    Map<String, Integer> m = f[1].equals("-") ? new HashMap<>() : new HashMap<>(Integer.parseInt(f[1]));
                    for (int i = 3; i < f.length; i++) {
                        final int v = i;
                        if (f[2].equals("c")) m.computeIfAbsent(f[i], k -> v); else m.put(f[i], v);
                    }
                    System.out.println("ORDER " + String.join(" ", m.keySet()));
                }
                default -> throw new IllegalArgumentException(line);
            }
        }
    }
}
'''


def _unavailable(reason: str) -> None:
    message = f"!!! streams assignor differential against Kafka NOT RUN: {reason}"
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{message} ({REQUIRE_ENV}=1)", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="module")
def kafka_assignor():
    """A function that runs input lines through the compiled runner and returns its output lines."""
    java, javac = shutil.which("java"), shutil.which("javac")
    if not java or not javac:
        _unavailable("java/javac not found on PATH")
    from conformance.maven import MavenUnavailable, classpath

    try:
        cp = classpath(ARTIFACTS)
    except MavenUnavailable as exc:
        _unavailable(f"Kafka 4.4.0 jars not available: {exc}")
    digest = hashlib.sha256((_RUNNER_JAVA + cp).encode()).hexdigest()[:16]
    classes = Path(tempfile.gettempdir()) / f"kafkapy-streams-assignor-{digest}"
    if not (classes / ".complete").is_file():
        staging = Path(tempfile.mkdtemp(prefix="kafkapy-streams-assignor-build-"))
        (staging / "StreamsAssignorRunner.java").write_text(_RUNNER_JAVA)
        built = subprocess.run([javac, "-nowarn", "-d", str(staging), "-cp", cp,
                                str(staging / "StreamsAssignorRunner.java")],
                               capture_output=True, text=True, timeout=180)
        if built.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            pytest.fail(f"javac failed:\n{built.stdout}\n{built.stderr}", pytrace=False)
        (staging / ".complete").write_text("ok\n")
        try:
            staging.rename(classes)
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)  # another session built it first

    def run(lines: list[str]) -> list[str]:
        done = subprocess.run([java, *JVM_OPTIONS, "-cp", f"{classes}{os.pathsep}{cp}", "StreamsAssignorRunner"],
                              input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=240)
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout.splitlines()

    return run


def _tasks_text(tasks) -> str:
    return ",".join(f"{s}.{p}" for s in sorted(tasks) for p in sorted(tasks[s]))


def _offsets_text(offsets) -> str:
    return ",".join(f"{s}.{p}={o}" for s in sorted(offsets) for p, o in sorted(offsets[s].items()))


def _random_cases(seed: int, count: int) -> list[tuple[GroupSpec, TopologyDescription]]:
    """Groups of 1-10 members over 1-6 processes, some carrying an earlier round's tasks and offsets."""
    rng = random.Random(seed)
    logging.getLogger("kafkapy.groupcoord.streams.assignor").setLevel(logging.ERROR)
    cases = []
    for _ in range(count):
        n_processes, single = rng.randint(1, 6), rng.random() < 0.4
        uuids = rng.random() < 0.3  # Kafka Streams' member and process ids are UUIDs

        def ident(prefix: str, i: int) -> str:
            return str(uuid.UUID(int=rng.getrandbits(128))) if uuids else f"{prefix}{i}"

        processes = [ident("p", i) for i in range(n_processes + 2)]

        def new_member(prefix: str, i: int) -> MemberSpec:
            member_id = ident(prefix, i)
            return MemberSpec(member_id, member_id if single else rng.choice(processes[:n_processes]))

        members = {m.member_id: m for m in (new_member("m", i) for i in range(rng.randint(1, 10)))}
        subs = {f"s{j}": rng.randint(0, 12) for j in range(rng.randint(1, 4))}
        topology = TopologyDescription(subs, frozenset(s for s in subs if rng.random() < 0.5))
        configs = {"num.standby.replicas": str(rng.randint(0, 3))}
        if rng.random() < 0.7:
            earlier = assign(GroupSpec(members, configs), topology)
            members = {m: MemberSpec(m, s.process_id, active=dict(earlier[m].active), standby=dict(earlier[m].standby))
                       for m, s in members.items() if rng.random() < 0.7}
            for i in range(rng.randint(0 if members else 1, 4)):
                joiner = new_member("n", i)
                members[joiner.member_id] = joiner
        if rng.random() < 0.5:
            for spec in members.values():
                for sub, n in subs.items():
                    if sub in topology.stateful and n:
                        for p in rng.sample(range(n), rng.randint(0, n)):
                            spec.task_offsets.setdefault(sub, {})[p] = rng.choice([0, 5, 100, rng.randrange(1000)])
        cases.append((GroupSpec(members, configs), topology))
    return cases


def test_same_assignment_as_kafka_4_4_0(kafka_assignor):
    cases = _random_cases(20260401, CASES)
    lines = []
    for group, topology in cases:
        lines.append(f"CASE {group.assignment_configs['num.standby.replicas']}")
        lines += [f"TOPO {s} {n} {int(s in topology.stateful)}" for s, n in topology.subtopologies.items()]
        lines += [f"MEMBER {m} {s.process_id} {_tasks_text(s.active)} {_tasks_text(s.standby)} {_offsets_text(s.task_offsets)}"
                  for m, s in sorted(group.members.items())]  # ids sharing a HashMap bucket: id order
        lines.append("END")
    output = iter(kafka_assignor(lines))
    differing = []
    for group, topology in cases:
        kafka = {}
        for line in iter(output.__next__, "DONE"):
            _, member_id, active, standby = line.split(" ")
            kafka[member_id] = (active, standby)
        ours = {m: (_tasks_text(a.active), _tasks_text(a.standby)) for m, a in assign(group, topology).items()}
        if ours != kafka:
            differing.append((group, topology, kafka, ours))
    assert not differing, f"{len(differing)} of {len(cases)} differ; first: {differing[0]}"


def test_hash_map_order_as_java(kafka_assignor):
    rng = random.Random(7)
    cases = []
    for _ in range(120):
        make = rng.choice([lambda: f"m{rng.randrange(100)}", lambda: str(uuid.UUID(int=rng.getrandbits(128))),
                           lambda: f"\u00e9{rng.randrange(50)}", lambda: f"p{rng.randrange(8) * 16}"])
        keys = list(dict.fromkeys(make() for _ in range(rng.randint(1, 60))))
        cases.append((keys, rng.choice([None, len(keys), 0, 1, 3]), rng.random() < 0.5))
    lines = [f"MAP {'-' if cap is None else cap} {'c' if cia else 'p'} {' '.join(keys)}" for keys, cap, cia in cases]
    for (keys, cap, cia), line in zip(cases, kafka_assignor(lines)):
        assert line.split(" ")[1:] == java_hash_map_order(keys, cap, compute_if_absent=cia), (keys, cap, cia)
