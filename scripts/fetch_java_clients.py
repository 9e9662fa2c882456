#!/usr/bin/env python3
"""Fetch the Apache Kafka Java client jars (kafka-clients 3.9.1) for the conformance tests.

The jars come from PyPI, not Maven: the wheel shigawire-apache-flink-libraries==2.0.0.post1
carries kafka-clients 3.9.1 and its runtime dependencies under pyflink/lib/. We download
that wheel once with pip and extract only the jars the Java client needs into
~/.cache/kafkapy/java-clients/. Re-running is cheap: when the jars are already there and
the stamp file matches, nothing is downloaded.

Usage:
    python scripts/fetch_java_clients.py            # prints the classpath (jars joined by ':')
    python scripts/fetch_java_clients.py --dir      # prints the directory holding the jars

Exit status is non-zero, with a message on stderr, when the jars cannot be had.
Nothing here is ever committed to the repository (*.jar is git-ignored).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

WHEEL_PROJECT = "shigawire-apache-flink-libraries"
WHEEL_VERSION = "2.0.0.post1"
WHEEL_FILENAME = "shigawire_apache_flink_libraries-2.0.0.post1-py3-none-any.whl"
KAFKA_CLIENTS_VERSION = "3.9.1"

# kafka-clients plus what it loads at run time: the slf4j API (no binding: slf4j then
# prints one warning and logs nothing) and the compression codecs for snappy/lz4/zstd.
JARS = (
    "kafka-clients.jar",
    "slf4j-api.jar",
    "lz4-java.jar",
    "snappy-java.jar",
    "zstd-jni.jar",
)
STAMP_NAME = "STAMP"
STAMP = f"{WHEEL_PROJECT}=={WHEEL_VERSION} kafka-clients {KAFKA_CLIENTS_VERSION} {' '.join(JARS)}\n"


def cache_root() -> Path:
    """Return the per-user cache directory shared by kafkapy's tooling."""
    override = os.environ.get("KAFKAPY_CACHE_DIR")
    if override:
        return Path(override)
    return Path.home() / ".cache" / "kafkapy"


def jar_dir() -> Path:
    """Return the directory where the extracted client jars live."""
    return cache_root() / "java-clients"


def _jars_ready(directory: Path) -> bool:
    stamp = directory / STAMP_NAME
    if not stamp.is_file() or stamp.read_text() != STAMP:
        return False
    return all((directory / name).is_file() and (directory / name).stat().st_size > 0 for name in JARS)


def _download_wheel(pip_dir: Path, timeout: float) -> Path:
    wheel = pip_dir / WHEEL_FILENAME
    if wheel.is_file() and zipfile.is_zipfile(wheel):
        return wheel
    pip_dir.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
        f"{WHEEL_PROJECT}=={WHEEL_VERSION}", "-d", str(pip_dir),
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise RuntimeError(f"pip download failed ({result.returncode}):\n{result.stderr[-2000:]}")
    if not wheel.is_file():
        raise RuntimeError(f"pip download succeeded but {wheel} is missing")
    return wheel


def ensure_java_clients(timeout: float = 600.0) -> list[Path]:
    """Make sure the client jars are extracted and return their paths (classpath order)."""
    directory = jar_dir()
    if not _jars_ready(directory):
        wheel = _download_wheel(cache_root() / "pip", timeout)
        directory.parent.mkdir(parents=True, exist_ok=True)
        # Extract into a sibling temp dir and rename, so a concurrent run never sees half a jar.
        staging = Path(tempfile.mkdtemp(prefix=".java-clients.", dir=directory.parent))
        staging.chmod(0o755)
        with zipfile.ZipFile(wheel) as archive:
            for name in JARS:
                member = f"pyflink/lib/{name}"
                try:
                    data = archive.read(member)
                except KeyError as missing:
                    raise RuntimeError(f"{member} not found in {wheel.name}") from missing
                (staging / name).write_bytes(data)
        (staging / STAMP_NAME).write_text(STAMP)
        if directory.exists():
            # A stale or partial copy: move it aside rather than mixing files.
            stale = Path(tempfile.mkdtemp(prefix=".java-clients-stale.", dir=directory.parent))
            directory.rename(stale / "old")
            shutil.rmtree(stale, ignore_errors=True)
        try:
            staging.rename(directory)
        except OSError:
            if not _jars_ready(directory):  # someone else won the race with a good copy otherwise
                raise
    return [directory / name for name in JARS]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", action="store_true", help="print the jar directory instead of the classpath")
    args = parser.parse_args(argv)
    try:
        jars = ensure_java_clients()
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as error:
        print(f"fetch_java_clients: cannot get kafka-clients {KAFKA_CLIENTS_VERSION}: {error}", file=sys.stderr)
        return 1
    print(jars[0].parent if args.dir else os.pathsep.join(str(jar) for jar in jars))
    return 0


if __name__ == "__main__":
    sys.exit(main())
