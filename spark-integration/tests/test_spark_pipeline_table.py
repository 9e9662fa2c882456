"""run_pipeline.py --table: the pipeline with its table step (issue 34), run as a user would. The
events topic is also an Iceberg table; new page views from format("kafka") come out once, joined
with each user's history read from the table (kafkapy_spark/table_history.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyiceberg")
pytestmark = pytest.mark.timeout(300)

RUN_PIPELINE = Path(__file__).resolve().parents[1] / "run_pipeline.py"


def test_run_pipeline_with_the_table_step(pyspark_40_env, tmp_path: Path) -> None:
    env = {**pyspark_40_env, "PYTHONUNBUFFERED": "1"}
    result = subprocess.run(
        [sys.executable, str(RUN_PIPELINE), "--master", "local[2]", "--events", "2000", "--no-restart",
         "--shuffle-partitions", "2", "--partitions", "4", "--table", "--table-events", "800",
         "--work-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=280, env=env, stdin=subprocess.DEVNULL,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-5000:]
    assert "counts match:" in result.stdout
    assert ("table step: 800 new views joined with the history of 2000 views from kafkapy.kafka.`page-views`"
            in result.stdout), result.stdout[-3000:]
    assert "every new view once, with its user's history" in result.stdout
    assert (tmp_path / "checkpoints" / "table_history" / "commits").is_dir()


def test_run_pipeline_table_with_bootstrap_needs_the_log_dir() -> None:
    result = subprocess.run([sys.executable, str(RUN_PIPELINE), "--table", "--bootstrap", "127.0.0.1:1"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "--table-log-dir" in result.stderr
