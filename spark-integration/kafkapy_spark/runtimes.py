"""The Spark versions the tests run on: one venv per pinned pyspark, connector jars from Maven.

Each runtime is a venv under ~/.cache/kafkapy/venvs/pyspark-<version>/ that holds pyspark (and its
py4j) and nothing else: it is created without pip and filled by the calling interpreter's pip
(`pip --python`), so it inherits nothing from the environment that made it. Spark's Kafka
connector (spark-sql-kafka-0-10 and its dependencies, kafka-clients among them) is resolved from
Maven Central by conformance.maven into ~/.m2; the jars pyspark already ships (Scala, Hadoop,
lz4, snappy, slf4j) are left out so the driver has one copy of each.

    python -m kafkapy_spark.runtimes install [4.0 3.5]    # scripts/install-spark.sh does this
    python -m kafkapy_spark.runtimes jars 3.5             # print the connector's jars
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from .jars import PINNED_CONNECTORS, ConnectorUnavailable, cache_root, maven_connector_jars, scala_binary_version

PIP_TIMEOUT_S = 900.0


class RuntimeUnavailable(RuntimeError):
    """A pinned pyspark could not be installed into its venv."""


@dataclass(frozen=True, slots=True)
class SparkRuntime:
    """One pinned Spark version: its pyspark venv and its Kafka connector on Maven Central."""

    spark_version: str
    scala_version: str

    @property
    def minor(self) -> str:
        return ".".join(self.spark_version.split(".")[:2])

    @property
    def venv_dir(self) -> Path:
        return cache_root() / "venvs" / f"pyspark-{self.spark_version}"

    @property
    def python(self) -> Path:
        return self.venv_dir / "bin" / "python"

    @property
    def site_packages(self) -> Path:
        return self.venv_dir / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"

    @property
    def pyspark_jars_dir(self) -> Path:
        return self.site_packages / "pyspark" / "jars"

    def installed(self) -> bool:
        marker = self.venv_dir / "installed.txt"
        return marker.is_file() and marker.read_text().strip() == self.spark_version and self.python.exists()


# Pinned: pyspark and its connector of the same version (pyspark 3.5 is Scala 2.12).
# connector 4.0.0 brings kafka-clients 3.9.0; connector 3.5.7 brings kafka-clients 3.4.1.
RUNTIMES: dict[str, SparkRuntime] = {
    minor: SparkRuntime(version, scala_binary_version(version)) for minor, version in PINNED_CONNECTORS.items()
}


def ensure_venv(runtime: SparkRuntime) -> Path:
    """The venv's python, creating the venv with pyspark==<pinned> on first use (locked, atomic)."""
    if runtime.installed():
        return runtime.python
    runtime.venv_dir.parent.mkdir(parents=True, exist_ok=True)
    with open(runtime.venv_dir.parent / f".{runtime.venv_dir.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if runtime.installed():
            return runtime.python
        shutil.rmtree(runtime.venv_dir, ignore_errors=True)
        # Built in place (a venv's paths are absolute) and marked installed only when complete.
        steps = [
            [sys.executable, "-m", "venv", "--without-pip", str(runtime.venv_dir)],
            [sys.executable, "-m", "pip", "--python", str(runtime.python), "install", "--quiet",
             "--disable-pip-version-check", "--no-input", f"pyspark=={runtime.spark_version}"],
        ]
        for argv in steps:
            try:
                result = subprocess.run(argv, capture_output=True, text=True, timeout=PIP_TIMEOUT_S,
                                        stdin=subprocess.DEVNULL)
            except subprocess.TimeoutExpired:
                raise RuntimeUnavailable(f"{' '.join(argv[:4])} ... did not finish in {PIP_TIMEOUT_S:.0f} s") from None
            if result.returncode != 0:
                tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-10:])
                raise RuntimeUnavailable(f"installing pyspark=={runtime.spark_version} into {runtime.venv_dir} "
                                         f"failed:\n{tail}")
        (runtime.venv_dir / "installed.txt").write_text(runtime.spark_version + "\n")
    return runtime.python


def connector_jars(runtime: SparkRuntime) -> list[Path]:
    """The runtime's Kafka connector jars from Maven Central, less those its pyspark ships."""
    return maven_connector_jars(runtime.spark_version, runtime.pyspark_jars_dir)


def install(minors: list[str]) -> int:
    """Create every runtime's venv and resolve its connector jars, the runtimes in parallel."""

    def one(minor: str) -> str:
        runtime = RUNTIMES[minor]
        started = time.monotonic()
        ensure_venv(runtime)
        venv_s = time.monotonic() - started
        connector = connector_jars(runtime)
        return (f"pyspark {runtime.spark_version} in {runtime.venv_dir} ({venv_s:.0f} s), connector "
                f"{', '.join(jar.name for jar in connector)} ({time.monotonic() - started - venv_s:.0f} s)")

    failed = 0
    with ThreadPoolExecutor(max_workers=len(minors)) as pool:
        for minor, future in [(m, pool.submit(one, m)) for m in minors]:
            try:
                print(f"install-spark: {future.result()}", flush=True)
            except (RuntimeUnavailable, ConnectorUnavailable) as error:
                failed += 1
                print(f"!!! install-spark: Spark {minor}: {error}", file=sys.stderr, flush=True)
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    if len(argv) < 1 or argv[0] not in ("install", "jars"):
        print(__doc__, file=sys.stderr)
        return 2
    minors = argv[1:] or list(RUNTIMES)
    unknown = [m for m in minors if m not in RUNTIMES]
    if unknown:
        print(f"unknown Spark version(s) {unknown}; known: {list(RUNTIMES)}", file=sys.stderr)
        return 2
    if argv[0] == "install":
        return install(minors)
    for minor in minors:
        print(os.pathsep.join(str(jar) for jar in connector_jars(RUNTIMES[minor])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
