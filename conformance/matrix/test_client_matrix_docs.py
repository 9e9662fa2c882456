"""scripts/client_matrix.py's docs writer: it replaces only its own section of docs/compatibility.md.

No broker: results files as conformance/matrix/runner.py writes them, read back and rendered.
"""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from conformance.matrix.runner import CellRun, read_runs, write_run

REPO_ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("client_matrix", REPO_ROOT / "scripts" / "client_matrix.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _runs(tmp_path: Path) -> list[CellRun]:
    ok = CellRun(client="kafka-clients (Java)", version="2.0.1", date="2026-11-29", returncode=0, results=[
        {"scenario": "metadata", "status": "pass", "observed": {"brokers": 1}, "detail": ""},
        {"scenario": "produce_zstd", "status": "unsupported", "observed": {}, "detail": "zstd needs 2.1"},
        {"scenario": "transactions", "status": "fail", "observed": {}, "detail": "KafkaException: a | b"},
    ])
    missing = CellRun(client="kafka-python", version="3.0.12", date="2026-11-29", unavailable="not installed")
    for run in (ok, missing):
        write_run(run, tmp_path / "results")
    return read_runs(tmp_path / "results")


def test_results_files_round_trip(tmp_path: Path) -> None:
    runs = _runs(tmp_path)
    assert [r.name for r in runs] == ["kafka-clients (Java)-2.0.1", "kafka-python-3.0.12"]
    assert runs[0].by_scenario()["transactions"]["detail"] == "KafkaException: a | b"
    assert runs[1].unavailable == "not installed" and runs[1].results == []


def test_docs_section_replaced_in_place_and_rest_kept(tmp_path: Path) -> None:
    script = _script()
    runs = _runs(tmp_path)
    docs = tmp_path / "compatibility.md"
    docs.write_text("# Client compatibility\n\nhand-written intro\n\n## Notes\n\n1. a note\n")
    differential = tmp_path / "differential.json"
    differential.write_text(json.dumps([{
        "client": "kafka-clients (Java)", "version": "2.0.1", "scenario": "metadata", "same": False,
        "accepted": False, "kafkapy": {"status": "pass", "observed": {"brokers": 1}},
        "reference": {"name": "kafka-3.9.1-zk", "status": "pass", "observed": {"brokers": 2}}}]))
    script.write_docs(docs, runs, {"kafkapy_commit": "abc1234", "broker": "kafkapy"}, differential)
    first = docs.read_text()
    assert first.startswith("# Client compatibility\n\nhand-written intro\n")
    assert first.index(script.BEGIN) < first.index(script.END) < first.index("## Notes\n\n1. a note")
    assert "| kafka-clients (Java) | 2.0.1 | pass |" in first
    assert "KafkaException: a \\| b" in first                   # a pipe does not break the table
    assert "kafka-python 3.0.12: not run: not installed" in first
    assert "(kafkapy @ abc1234)" in first and "kafka-3.9.1-zk | 1 | 0 | 0 | **1** |" in first
    # Again, from the same results: the same file, one generated section.
    script.write_docs(docs, runs, {"kafkapy_commit": "abc1234", "broker": "kafkapy"}, differential)
    assert docs.read_text() == first and first.count(script.BEGIN) == 1
