"""The one command that runs the whole pipeline, run as a user would (small event count)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(240)

RUN_PIPELINE = Path(__file__).resolve().parents[1] / "run_pipeline.py"


def test_run_pipeline_starts_kafkapy_and_verifies_its_counts(pyspark_40_env, tmp_path: Path) -> None:
    # pyspark 4.0 comes from its venv (PYTHONPATH), kafkapy and confluent-kafka from this environment.
    env = {**pyspark_40_env, "PYTHONUNBUFFERED": "1"}
    result = subprocess.run(
        [sys.executable, str(RUN_PIPELINE), "--master", "local[2]", "--events", "3000",
         "--shuffle-partitions", "2", "--max-offsets-per-trigger", "1000", "--work-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=220, env=env, stdin=subprocess.DEVNULL,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-5000:]
    assert "counts match:" in result.stdout
    assert "startingOffsets={\"page-views\"" in result.stdout
    assert "startingOffsetsByTimestamp={\"page-views\"" in result.stdout
    assert result.stdout.count("batch report for topic page-views") == 2
    assert "query caught up" in result.stderr and "run 2 of 2" in result.stderr  # restarted midway
    assert (tmp_path / "checkpoints" / "page_view_counts" / "commits").is_dir()


def test_run_pipeline_help_names_the_master_option() -> None:
    result = subprocess.run([sys.executable, str(RUN_PIPELINE), "--help"], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0 and "--master" in result.stdout and "--bootstrap" in result.stdout
