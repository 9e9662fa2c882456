"""The word count scenario of issue 32, the same against any broker: what the members and the broker showed.

run_word_count(bootstrap, work_dir) produces keyed sentences, starts instances a, b and c of the
Kafka Streams 4.4 word count (group.protocol=streams, exactly_once_v2), SIGKILLs b while more
sentences flow, adds d, produces more, and reads the output read_committed until every word's last
count is exact. It returns an Observation: the assignment each phase settled on (from the instances'
own printouts), describeStreamsGroups at each phase, and the final counts; the caller asserts.
"""
from __future__ import annotations

import collections
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import re

from conformance.streams_groups.harness import (TASKS, WordCountApp, admin, normalize, produce_sentences, read_counts,
                                                streams_groups_tool)

__all__ = ["Observation", "run_word_count", "shape"]

SENTENCES_BEFORE = 2000     # produced before any instance starts
SENTENCES_DURING = 3000     # produced while b is killed, at RATE sentences/s
SENTENCES_AFTER = 1000      # produced once d has joined
RATE = 1000.0
KILL_AFTER_S = 1.0
STATEFUL_TASKS = 6          # the counting subtopology's tasks (one store each)


@dataclass
class Observation:
    app: WordCountApp
    phases: dict[str, dict] = field(default_factory=dict)        # phase -> {instance: (active, standby)}
    describes: dict[str, dict] = field(default_factory=dict)     # phase -> describe JSON
    expected: collections.Counter = field(default_factory=collections.Counter)
    counts: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    tool: dict[str, str] = field(default_factory=dict)              # kafka-streams-groups.sh args -> text


def run_word_count(bootstrap: str, work_dir: Path, *, standby_replicas: int = 0, after_add=None) -> Observation:
    """The scenario; `after_add(app, obs)` runs once d has joined (e.g. to restart the broker).

    With `standby_replicas` the group config streams.num.standby.replicas is set before the first
    member joins; each phase then also waits for that many standbys of each stateful task (the six of
    the counting subtopology), as far as there are other instances to hold them.
    """
    app = WordCountApp.create(bootstrap, work_dir, protocol="streams")
    obs = Observation(app)
    begin = time.monotonic()

    def standbys(instances: int) -> int:
        return STATEFUL_TASKS * min(standby_replicas, instances - 1)

    try:
        if standby_replicas:
            (answer,) = admin(bootstrap, f"set-config:{app.app_id}:streams.num.standby.replicas={standby_replicas}")
            assert answer.get("ok"), answer
        produce_sentences(bootstrap, app.input, SENTENCES_BEFORE, seed=1, expected=obs.expected)
        for name in "abc":
            app.start(name)
        obs.phases["three"] = app.wait_stable("abc", timeout=120, standbys=standbys(3))
        obs.seconds["three stable"] = time.monotonic() - begin
        obs.describes["three"] = admin(bootstrap, f"describe:{app.app_id}")[0]

        during = collections.Counter()
        producer = threading.Thread(target=produce_sentences, args=(bootstrap, app.input, SENTENCES_DURING),
                                    kwargs={"seed": 2, "rate": RATE, "expected": during})
        producer.start()
        try:
            time.sleep(KILL_AFTER_S)
            app.kill("b")
            killed = time.monotonic()
            obs.phases["after kill"] = app.wait_stable("ac", timeout=90, standbys=standbys(2))
            obs.seconds["kill to stable"] = time.monotonic() - killed
            app.start("d")
            added = time.monotonic()
            obs.phases["after add"] = app.wait_stable("acd", timeout=90, standbys=standbys(3))
            obs.seconds["add to stable"] = time.monotonic() - added
        finally:
            producer.join(60)
        obs.expected.update(during)
        obs.describes["after add"] = admin(bootstrap, f"describe:{app.app_id}")[0]
        ids = {m["memberId"] for m in obs.describes["after add"].get("members", [])}
        for run in streams_groups_tool(bootstrap, ("--describe", "--group", app.app_id, "--members", "--verbose"),
                                       ("--describe", "--group", app.app_id, "--state", "--verbose")):
            # Which tasks a member holds depends on the process ids; how many per subtopology does not.
            text = re.sub(r"((?:TARGET-)?(?:ACTIVE|STANDBY|WARMUP)):((?: \d+:\[[\d,]*\];)+)", _task_count,
                          normalize(run.out + run.err, app, ids))
            # Epochs count the group's changes, which vary run to run (Kafka 4.4 itself showed 6 and 7 here).
            text = re.sub(r"(?m)^<app> \d+ (\d+) <member> streams \d+ ",
                          r"<app> <epoch> \1 <member> streams <epoch> ", text)
            text = re.sub(r"(?m) (Stable|Empty|NotReady|Assigning|Reconciling) \d+ \d+ (\d+)$",
                          r" \1 <epoch> <epoch> \2", text)
            obs.tool[" ".join(run.argv[3:]).replace(app.app_id, "<app>")] = f"rc {run.rc}\n{text}"
        if after_add is not None:
            after_add(app, obs)
        produce_sentences(bootstrap, app.input, SENTENCES_AFTER, seed=3, expected=obs.expected)
        obs.counts, obs.problems = read_counts(bootstrap, app.output, obs.expected, timeout=90,
                                               alive=app.check_alive)
        obs.seconds["total"] = time.monotonic() - begin
        return obs
    except BaseException:
        app.stop_all()
        raise


def _task_count(match: re.Match) -> str:
    """"ACTIVE: 0:[1,4]; 1:[2];" -> "ACTIVE: 3 tasks"."""
    tasks = re.findall(r"[0-9]+(?=[,\]])", match[2])
    if "ACTIVE" not in match[1]:
        # Where standbys can go depends on where the actives went (process ids): only totals compare.
        return f"{match[1]}: <n> tasks"
    return f"{match[1]}: {len(tasks)} tasks"


def shape(obs: Observation) -> dict:
    """What must match between brokers: per phase the sorted active/standby counts the members saw,
    and the describe output without ids, epochs and generated names."""
    out: dict = {}
    for phase, assignment in obs.phases.items():
        out[f"members {phase}"] = {"active": sorted(len(a) for a, _ in assignment.values()),
                                    "standby total": sum(len(s) for _, s in assignment.values())}
    for args, text in obs.tool.items():
        out[f"kafka-streams-groups.sh {args}"] = text
    for phase, d in obs.describes.items():
        app = obs.app
        def name(topic: str) -> str:
            return topic.replace(app.app_id, "<app>").replace(app.input, "<input>").replace(app.output, "<output>")
        out[f"describe {phase}"] = {
            "state": d.get("state"),
            "members": len(d.get("members", [])),
            "assigned active": sorted(len(m["assignment"]["active"]) for m in d.get("members", [])),
            "assigned standby total": sum(len(m["assignment"]["standby"]) for m in d.get("members", [])),
            "assignment == target": all(m["assignment"] == m["targetAssignment"] for m in d.get("members", [])),
            "all tasks": sorted(t for m in d.get("members", []) for t in m["assignment"]["active"]) == sorted(TASKS),
            "subtopologies": [
                {"id": s["id"], "sourceTopics": [name(t) for t in s["sourceTopics"]],
                 "repartitionSinkTopics": [name(t) for t in s["repartitionSinkTopics"]],
                 "stateChangelogTopics": {name(t): v for t, v in s["stateChangelogTopics"].items()},
                 "repartitionSourceTopics": {name(t): v for t, v in s["repartitionSourceTopics"].items()}}
                for s in d.get("subtopologies", [])],
        }
    return out
