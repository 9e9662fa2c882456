"""Pinned Java artifacts from Maven Central, resolved by Maven itself, for the client matrix.

`classpath(["org.apache.kafka:kafka-clients:3.7.0", ...])` writes a throwaway pom.xml that depends
on the given artifacts (group:artifact:version, optionally group:artifact:version:classifier), lets
`mvn dependency:build-classpath` resolve them with their runtime dependencies into Maven's own
cache (~/.m2, never the repository), and returns the classpath. The answer is cached per artifact
list under ~/.cache/kafkapy/maven/, so a second call costs no Maven start.

    python -m conformance.maven org.apache.kafka:kafka-clients:2.0.1      # prints the classpath

Raises MavenUnavailable (with Maven's last lines) when mvn is missing or cannot resolve; tests turn
that into a loud skip, or a failure under KAFKAPY_REQUIRE_JAVA=1.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterable, Sequence

__all__ = ["MavenUnavailable", "cache_root", "classpath", "jars"]

# Dependencies every matrix program wants beside its main artifact: a logger binding that prints
# WARN and above to stderr (no binding would print slf4j's "no provider" notice and nothing else).
_DEFAULT_TIMEOUT_S = 900.0


class MavenUnavailable(RuntimeError):
    pass


def cache_root() -> Path:
    base = os.environ.get("KAFKAPY_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "kafkapy")
    return Path(base) / "maven"


def _dependency_xml(coordinate: str, exclusions: Sequence[str]) -> str:
    parts = coordinate.split(":")
    if len(parts) not in (3, 4):
        raise ValueError(f"not group:artifact:version[:classifier]: {coordinate!r}")
    group, artifact, version = parts[:3]
    classifier = f"<classifier>{parts[3]}</classifier>" if len(parts) == 4 else ""
    excl = "".join(f"<exclusion><groupId>{e.split(':')[0]}</groupId><artifactId>{e.split(':')[1]}</artifactId>"
                   f"</exclusion>" for e in exclusions)
    excl = f"<exclusions>{excl}</exclusions>" if excl else ""
    return (f"<dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
            f"<version>{version}</version>{classifier}{excl}</dependency>")


def _pom(coordinates: Sequence[str], exclusions: Sequence[str]) -> str:
    deps = "\n    ".join(_dependency_xml(c, exclusions) for c in coordinates)
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>kafkapy.matrix</groupId>
  <artifactId>resolve</artifactId>
  <version>0</version>
  <packaging>pom</packaging>
  <dependencies>
    {deps}
  </dependencies>
</project>
"""


def classpath(coordinates: Iterable[str], *, exclusions: Iterable[str] = (),
              timeout: float = _DEFAULT_TIMEOUT_S) -> str:
    """The runtime classpath (jars joined by os.pathsep) of `coordinates` and their dependencies."""
    coordinates = list(coordinates)
    exclusions = list(exclusions)
    key = hashlib.sha256("\n".join(coordinates + ["--"] + exclusions).encode()).hexdigest()[:16]
    work = cache_root() / key
    done = work / "classpath.txt"
    if done.exists():
        text = done.read_text().strip()
        if text and all(os.path.exists(j) for j in text.split(os.pathsep)):
            return text
    mvn = shutil.which("mvn")
    if mvn is None:
        raise MavenUnavailable("mvn not found (Debian: apt-get install maven)")
    work.mkdir(parents=True, exist_ok=True)
    (work / "pom.xml").write_text(_pom(coordinates, exclusions))
    (work / "artifacts.txt").write_text("\n".join(coordinates) + "\n")
    out = work / f"classpath.{os.getpid()}.partial"
    argv = [mvn, "-B", "-q", "-f", str(work / "pom.xml"), "dependency:build-classpath",
            "-Dmdep.includeScope=runtime", f"-Dmdep.outputFile={out}"]
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise MavenUnavailable(f"mvn did not resolve {coordinates} within {timeout:.0f} s") from None
    if result.returncode != 0 or not out.exists():
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
        raise MavenUnavailable(f"mvn could not resolve {coordinates}:\n{tail}")
    text = out.read_text().strip()
    os.replace(out, done)
    return text


def jars(coordinates: Iterable[str], **kwargs) -> list[str]:
    return [j for j in classpath(coordinates, **kwargs).split(os.pathsep) if j]


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: python -m conformance.maven GROUP:ARTIFACT:VERSION[:CLASSIFIER] ...")
    try:
        print(classpath(sys.argv[1:]))
    except MavenUnavailable as exc:
        sys.exit(str(exc))
