"""Smoke check of bench/groups/rebalance_protocols.py: its --quick mode runs against a real kafkapy process.

Three confluent-kafka consumers (group.protocol=consumer, each in its own process) form a group on a
6-partition topic, one leaves, a fourth joins; every phase settles with each partition owned by exactly one
member, ConsumerGroupDescribe then agrees (Stable, every member's assignment equal to its target and
to what the consumer reports), and no partition is ever owned by two consumers at once. The measured
comparison with the classic protocol is in docs/benchmarks.md; it is not run in CI.
"""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(90)

SCRIPT = Path(__file__).resolve().parent.parent / "bench" / "groups" / "rebalance_protocols.py"


def load_script():
    spec = importlib.util.spec_from_file_location("kafkapy_bench_rebalance_protocols", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_quick_run_consumer_protocol_settles_without_double_ownership(tmp_path):
    script = load_script()
    out = tmp_path / "result.json"
    assert script.main(["--quick", "--modes", "consumer", "--json", str(out)]) == 0
    result = json.loads(out.read_text())["fast"]
    assert result["failures"]["consumer"] == []
    (sample,) = result["samples"]["consumer"]
    phases = [sample["form"], *sample["leave"], *sample["join"]]
    assert len(phases) == 3
    for timing in phases:
        assert 0 <= timing["owned"] <= timing["settled"] < 30, timing
        view = timing["broker"]
        assert view.get("state") == "Stable" and view.get("converged"), view
    assert sample["overlap"] == 1


def _event(t: float, member: str, owned: list[int], ev: str = "assign") -> dict:
    return {"ev": ev, "t": t, "member": member, "owned": owned}


def test_measures_from_events():
    """The pure measures the benchmark reports, on a hand-made handover of partition 1 from a to b."""
    script = load_script()
    events = [_event(1.0, "a", [0, 1]), _event(1.5, "a", [0, 1]),  # a no-op callback
              _event(2.0, "a", [0], "revoke"), _event(3.0, "b", [1])]
    assert [e["t"] for e in script.real_changes(events)] == [1.0, 2.0, 3.0]
    assert script.is_owned(script.ownership_at(events, 3.0), ["a", "b"], 2)
    assert not script.is_owned(script.ownership_at(events, 2.5), ["a", "b"], 2)
    # two partitions unowned for 1 s, none for 1 s, one for 1 s
    assert script.unowned_partition_seconds(events, 2, 0.0, 3.0) == 3.0
    assert script.unowned_partition_seconds(events, 2, 1.5, 2.5) == 0.5
    assert script.max_overlap(events) == 1
    assert script.max_overlap(events + [_event(2.5, "b", [0])]) == 2
