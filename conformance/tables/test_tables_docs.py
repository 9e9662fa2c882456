"""The examples of docs/tables.md run as they are written there, in order, against one broker.

A fenced block preceded by `<!-- test: KIND [OPTIONS] -->` is run in a directory where `kafkapy-data`
is the broker's log dir (the default of `kafkapy serve`), with `localhost:9092` replaced by the
broker's address (the only change made to a block):
- `sh`: a bash script (`set -euo pipefail`), `kafkapy` on PATH; option `spark`: also `spark-submit`
  of the project's pyspark 4.0 venv;
- `python`: a script run with this interpreter; option `wait-for-table=TOPIC`: afterwards the
  table of TOPIC must reach the topic's log end offsets;
- `pyspark`: a script run with this interpreter and pyspark 4.0 on PYTHONPATH.
Every block must exit 0. Spark blocks skip loudly without pyspark or Maven, and fail instead under
KAFKAPY_REQUIRE_SPARK=1. Iceberg's Spark runtime is resolved into ~/.m2 first (conformance.maven),
where `spark.jars.packages` (Ivy's local-m2-cache) then finds it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyiceberg")

from conformance.tables.readers import (  # noqa: E402
    ReaderUnavailable, TableLocation, log_end_offsets, pyspark_40_path, spark_jars, wait_for_table,
)

DOC = Path(__file__).resolve().parents[2] / "docs" / "tables.md"
_BLOCK = re.compile(r"<!-- test: ([\w-]+)((?: [\w=.-]+)*) -->\s*\n```[\w-]*\n(.*?)\n```", re.S)
BLOCK_TIMEOUT_S = 150

pytestmark = pytest.mark.timeout(420)


@pytest.fixture(scope="module")
def broker_overrides() -> dict[str, str]:
    return {"kafkapy.iceberg.commit.interval.ms": "500"}


def examples() -> list[tuple[str, list[str], int, str]]:
    text = DOC.read_text()
    return [(m.group(1), m.group(2).split(), text.count("\n", 0, m.start()) + 1, m.group(3))
            for m in _BLOCK.finditer(text)]


def test_the_guide_has_runnable_examples_for_every_reader() -> None:
    kinds = {(kind, tuple(options)) for kind, options, _, _ in examples()}
    assert {("sh", ()), ("sh", ("spark",)), ("python", ()), ("pyspark", ())} <= kinds
    text = DOC.read_text()
    for reader in ("SqlCatalog(", "iceberg_scan(", "spark.sql.catalog.kafkapy", "kafkapy tables describe"):
        assert reader in text


def spark_env(env: dict[str, str]) -> dict[str, str]:
    try:
        site = pyspark_40_path()
        spark_jars()
    except ReaderUnavailable as error:
        message = f"!!! docs/tables.md Spark examples NOT RUN: {error}"
        if os.environ.get("KAFKAPY_REQUIRE_SPARK") == "1":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return {**env, "PYTHONPATH": os.pathsep.join(p for p in (str(site), env.get("PYTHONPATH")) if p),
            "PATH": f"{site / 'pyspark' / 'bin'}{os.pathsep}{env['PATH']}", "SPARK_LOCAL_IP": "127.0.0.1",
            "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}


def test_the_examples_run_in_order(broker, tmp_path: Path) -> None:
    (tmp_path / "kafkapy-data").symlink_to(broker.data_dir)
    location = TableLocation(broker.data_dir)
    repo = str(DOC.parents[1])  # kafkapy importable as after `pip install -e .`
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1",
           "PYTHONPATH": os.pathsep.join(p for p in (repo, os.environ.get("PYTHONPATH")) if p),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    for number, (kind, options, line, code) in enumerate(examples()):
        code = code.replace("localhost:9092", broker.bootstrap)
        block_env = spark_env(env) if kind == "pyspark" or "spark" in options else env
        if kind == "sh":
            argv = ["bash", "-c", "set -euo pipefail\n" + code]
        else:
            script = tmp_path / f"example_{number}.py"
            script.write_text(code + "\n")
            argv = [sys.executable, str(script)]
        result = subprocess.run(argv, cwd=tmp_path, env=block_env, capture_output=True, text=True,
                                timeout=BLOCK_TIMEOUT_S, stdin=subprocess.DEVNULL)
        assert result.returncode == 0, (f"docs/tables.md line {line} ({kind}) exited {result.returncode}:\n"
                                        f"{result.stdout[-3000:]}\n{result.stderr[-5000:]}")
        for option in options:
            if option.startswith("wait-for-table="):
                topic = option.split("=", 1)[1]
                wait_for_table(location, topic, log_end_offsets(broker.bootstrap, topic))
        if kind == "pyspark" or "spark" in options:
            assert re.search(r"orders: 30\b|\|\s*\d+\|\s*\d+\|", result.stdout), result.stdout[-3000:]
