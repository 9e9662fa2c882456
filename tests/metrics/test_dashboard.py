"""The Grafana dashboard queries only names the exporter declares (no broker needed; the live check is
conformance/test_metrics.py::test_grafana_dashboard_queries_only_exported_names)."""
from __future__ import annotations

import json
import re
from pathlib import Path

from kafkapy.metrics.collectors import METRIC_SOURCES

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "kafkapy-dashboard.json"
# prometheus-client's process collector
PROCESS_NAMES = {"process_resident_memory_bytes", "process_open_fds", "process_cpu_seconds_total"}


def _exprs(node):
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "expr" and isinstance(value, str):
                yield value
            else:
                yield from _exprs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _exprs(item)


def test_every_dashboard_query_uses_declared_names():
    dashboard = json.loads(DASHBOARD.read_text())
    declared = set(METRIC_SOURCES) | PROCESS_NAMES | {
        name + suffix for name in METRIC_SOURCES for suffix in ("_count", "_sum")}
    names = set()
    for expr in _exprs(dashboard):
        names |= set(re.findall(r"\b((?:kafka|kafkapy|process)_[a-z0-9_]+)", expr))
    assert len(names) >= 20
    assert names <= declared, sorted(names - declared)


def test_dashboard_is_importable_json_with_a_datasource_input():
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["__inputs"][0]["pluginId"] == "prometheus"
    assert all(panel["targets"] for panel in dashboard["panels"])
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))


def test_every_exported_name_is_in_the_operations_name_table():
    doc = (DASHBOARD.parents[1] / "operations.md").read_text()
    missing = [name for name in METRIC_SOURCES if f"| `{name}` |" not in doc]
    assert not missing, missing
