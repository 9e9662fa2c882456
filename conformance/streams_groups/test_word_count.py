"""Issue 32's proof: a Kafka Streams 4.4 word count with group.protocol=streams and exactly_once_v2.

The same scenario (scenario.py) runs on a real Kafka 4.4.0 broker (KRaft, jars from Maven) as the
reference and on kafkapy: sentences keyed, three instances, one SIGKILLed while sentences flow, a
fourth added, more sentences; the counts read read_committed are exact and never written twice, the
tasks were spread over the instances and moved after the kill and the add. test_differential then
compares what the members saw and what describeStreamsGroups showed on both brokers.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from conformance.streams_groups.harness import TASKS
from conformance.streams_groups.scenario import Observation, run_word_count, shape

pytestmark = pytest.mark.timeout(300)

RESULTS: dict[tuple[str, int], Observation] = {}


def check_observation(obs: Observation) -> None:
    """What must hold on any broker: exact counts, once each; tasks spread and moved."""
    app = obs.app
    assert not obs.problems, f"counts written more than once: {obs.problems[:10]}"
    assert obs.counts == dict(obs.expected), (
        f"final counts differ from the produced words: "
        f"{ {w: (obs.counts.get(w), n) for w, n in obs.expected.items() if obs.counts.get(w) != n} }\n{app.tails()}")
    three, after_kill, after_add = obs.phases["three"], obs.phases["after kill"], obs.phases["after add"]
    assert all(active for active, _ in three.values()), f"tasks not spread over three instances: {three}"
    moved = set(three["b"][0])
    assert moved <= set(after_kill["a"][0]) | set(after_kill["c"][0]), (three, after_kill)
    assert after_add["d"][0], f"the added instance got no active task: {after_add}"
    for phase, d in obs.describes.items():
        assert d.get("error") is None, f"describeStreamsGroups {phase}: {d}"
        assert d["state"] == "Stable", (phase, d)
        assert sorted(t for m in d["members"] for t in m["assignment"]["active"]) == sorted(TASKS), (phase, d)
    assert len(obs.describes["three"]["members"]) == 3
    assert len(obs.describes["after add"]["members"]) == 3   # a, c, d: b was fenced by its session timeout


@pytest.mark.parametrize("standby_replicas", [0, 1])
def test_word_count_exactly_once(bootstrap: str, standby_replicas: int, request: pytest.FixtureRequest,
                                 tmp_path: Path) -> None:
    target = request.node.callspec.params["bootstrap"]
    obs = run_word_count(bootstrap, tmp_path, standby_replicas=standby_replicas)
    try:
        check_observation(obs)
        for inst in obs.app.instances.values():
            text = inst.log.read_text(errors="replace")
            assert "UNCAUGHT" not in text, inst.tail()
    finally:
        obs.app.stop_all()
    RESULTS[(target, standby_replicas)] = obs
    print(f"{target}: {obs.seconds} {shape(obs)}")


# Differences between kafkapy and Kafka 4.4 in shape() that are understood: key -> reason.
KNOWN_DIFFERENCES: dict[str, str] = {}


@pytest.mark.parametrize("standby_replicas", [0, 1])
def test_differential(standby_replicas: int) -> None:
    """The same scenario on both brokers: what the members saw and what describe showed match."""
    missing = [t for t in ("kafka-4.4", "kafkapy") if (t, standby_replicas) not in RESULTS]
    if missing:
        pytest.skip(f"!!! no differential: the word count did not pass on {missing}")
    reference, ours = shape(RESULTS[("kafka-4.4", standby_replicas)]), shape(RESULTS[("kafkapy", standby_replicas)])
    differences = {key: (reference.get(key), ours.get(key)) for key in reference.keys() | ours.keys()
                   if reference.get(key) != ours.get(key) and key not in KNOWN_DIFFERENCES}
    assert not differences, "\n".join(f"{key}:\n  kafka-4.4: {ref}\n  kafkapy:   {got}"
                                       for key, (ref, got) in sorted(differences.items()))
