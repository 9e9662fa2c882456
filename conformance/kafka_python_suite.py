"""Run kafka-python's own integration test suite (from its PyPI sdist) against a running broker.

    python -m conformance.kafka_python_suite 127.0.0.1:9092      # prints counts, writes build/

kafka-python's suite supports an external broker: with KAFKA_URI=PLAINTEXT://host:port its
`kafka_broker` fixture (test/integration/conftest.py) wraps the address instead of spawning
Kafka, and KAFKA_VERSION tells the tests which broker version to expect (it is also passed
as `api_version` to every client they build). The sdist of 3.0.x lacks test/__init__.py and
test/service.py, which the fixtures import; we add minimal stand-ins (ours, not upstream's).

The SSL and SASL integration modules always spawn their own Kafka with special listeners,
so they are not run here.
"""

from __future__ import annotations

import argparse
import fnmatch
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
CACHE_ROOT = Path(os.environ.get("KAFKAPY_CACHE_DIR", Path.home() / ".cache" / "kafkapy"))
ALLOW_LIST = Path(__file__).resolve().parent / "kafka_python_allow.txt"
SUMMARY_DIR = REPO_ROOT / "build"
# The Kafka version kafkapy presents itself as (its ApiVersions ranges follow this release).
DEFAULT_KAFKA_VERSION = os.environ.get("KAFKAPY_KAFKA_VERSION", "3.9.0")
NOT_RUN_MODULES = ("test_ssl_integration.py", "test_sasl_integration.py")
PER_TEST_TIMEOUT_S = 30
SUITE_TIMEOUT_S = 900

SERVICE_STAND_IN = textwrap.dedent('''\
    """Stand-in for kafka-python's test/service.py, missing from its sdist (written by kafkapy's harness).

    Only ExternalService is functional: kafkapy runs the suite against an already running broker.
    """


    class ExternalService:
        def __init__(self, host, port):
            self.host = host
            self.port = port

        def open(self):
            pass

        def close(self):
            pass

        def dump_logs(self):
            pass


    class SpawnedService:
        def __init__(self, *args, **kwargs):
            raise RuntimeError("spawning Kafka is not supported here; set KAFKA_URI to use an external broker")
    ''')


class SuiteUnavailable(RuntimeError):
    """The kafka-python sdist could not be downloaded or does not have the expected layout."""


@dataclass(slots=True)
class SuiteResult:
    passed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)      # failures and errors, as node ids
    skipped: list[tuple[str, str]] = field(default_factory=list)   # (node id, reason)
    messages: dict[str, str] = field(default_factory=dict)          # node id -> first failure line
    returncode: int = 0
    output_tail: str = ""

    def counts(self) -> str:
        return f"{len(self.passed)} passed, {len(self.failed)} failed, {len(self.skipped)} skipped"


@dataclass(slots=True)
class AllowEntry:
    pattern: str
    reason: str


def installed_kafka_python_version() -> str:
    return importlib.metadata.version("kafka-python")


def fetch_sdist(version: str) -> Path:
    """Download and unpack the kafka-python sdist once; returns the source root (cached)."""
    base = CACHE_ROOT / f"kafka-python-{version}-sdist"
    source_root = base / "src"
    if (source_root / "test" / "integration" / "conftest.py").is_file():
        return source_root
    base.mkdir(parents=True, exist_ok=True)
    download_dir = base / "download"
    download_dir.mkdir(exist_ok=True)
    archives = list(download_dir.glob("kafka[-_]python-*.tar.gz"))
    if not archives:
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-binary", ":all:", "--no-deps",
               f"kafka-python=={version}", "-d", str(download_dir)]
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        archives = list(download_dir.glob("kafka[-_]python-*.tar.gz"))
        if result.returncode != 0 or not archives:
            raise SuiteUnavailable(f"pip download of kafka-python=={version} sdist failed:\n{result.stderr[-2000:]}")
    staging = Path(tempfile.mkdtemp(prefix="extract-", dir=base))
    with tarfile.open(archives[0]) as tar:
        tar.extractall(staging, filter="data")
    roots = [p.parent.parent.parent for p in staging.glob("*/test/integration/conftest.py")]
    if not roots:
        raise SuiteUnavailable(f"no test/integration/conftest.py in {archives[0].name}")
    shutil.rmtree(source_root, ignore_errors=True)
    roots[0].rename(source_root)
    shutil.rmtree(staging, ignore_errors=True)
    return source_root


def add_stand_ins(source_root: Path) -> None:
    """Create the files the sdist's test fixtures import but the sdist does not ship."""
    test_dir = source_root / "test"
    init = test_dir / "__init__.py"
    if not init.exists():
        # Without it, `import test` finds the standard library's regression-test package.
        init.write_text("")
    service = test_dir / "service.py"
    if not service.exists():
        service.write_text(SERVICE_STAND_IN)


def load_allow_list(path: Path = ALLOW_LIST) -> list[AllowEntry]:
    """Lines `<node id glob>  # <reason>`; a reason is required, blank lines and full-line comments ignored."""
    entries = []
    if not path.exists():
        return entries
    for lineno, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        pattern, sep, reason = line.partition("#")
        if not sep or not reason.strip():
            raise ValueError(f"{path}:{lineno}: allow-list entry without a '# reason': {raw!r}")
        entries.append(AllowEntry(pattern.strip(), reason.strip()))
    return entries


def allowed_by(node_id: str, entries: list[AllowEntry]) -> AllowEntry | None:
    """The entry matching the node id, with or without its [parameters] suffix."""
    bare = node_id.split("[", 1)[0]
    for entry in entries:
        if fnmatch.fnmatchcase(node_id, entry.pattern) or fnmatch.fnmatchcase(bare, entry.pattern):
            return entry
    return None


def _node_id(case: ET.Element) -> str:
    # junit classname "test.integration.test_admin_integration" (+ ".TestClass") and name "test_x[param]"
    classname = case.get("classname", "")
    parts = classname.split(".")
    module_index = next((i for i, part in enumerate(parts) if part.startswith("test_")), len(parts) - 1)
    module = "/".join(parts[: module_index + 1]) + ".py"
    rest = parts[module_index + 1:]
    return "::".join([module, *rest, case.get("name", "")])


def parse_junit(xml_path: Path) -> SuiteResult:
    result = SuiteResult()
    root = ET.parse(xml_path).getroot()
    for case in root.iter("testcase"):
        node_id = _node_id(case)
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        skipped = case.find("skipped")
        if problem is not None:
            if node_id not in result.failed:  # a test can fail and also error in teardown
                result.failed.append(node_id)
                result.messages[node_id] = (problem.get("message") or "").splitlines()[0][:300] if problem.get("message") else ""
        elif skipped is not None:
            result.skipped.append((node_id, skipped.get("message", "")))
        else:
            result.passed.append(node_id)
    return result


def run_suite(bootstrap: str, kafka_version: str = DEFAULT_KAFKA_VERSION, extra_args: list[str] | None = None,
              timeout: float = SUITE_TIMEOUT_S) -> SuiteResult:
    """Run the integration tests against `bootstrap` ("host:port") and return the parsed outcome."""
    version = installed_kafka_python_version()
    source_root = fetch_sdist(version)
    add_stand_ins(source_root)
    SUMMARY_DIR.mkdir(exist_ok=True)
    junit = SUMMARY_DIR / "kafka-python-suite.junit.xml"
    junit.unlink(missing_ok=True)
    cmd = [
        sys.executable, "-m", "pytest", "test/integration",
        "-p", "no:cacheprovider",
        "-o", "addopts=",            # the sdist's addopts need pytest-timeout/pytest-mock options we set ourselves
        "-o", "log_level=WARNING",
        "-o", "junit_family=xunit2",
        "-q", "-rfE", "--tb=native",   # pytest's own formatter can hit a CPython 3.11 ast bug here
        f"--junitxml={junit}",
    ]
    for module in NOT_RUN_MODULES:
        cmd.append(f"--ignore=test/integration/{module}")
    if _has_pytest_timeout():
        cmd += [f"--timeout={PER_TEST_TIMEOUT_S}", "--timeout-method=signal"]
    cmd += list(extra_args or [])
    # The fixtures check that a Kafka install dir exists even when they never start it.
    no_kafka_install = source_root / "servers" / "external-broker"
    no_kafka_install.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, KAFKA_URI=f"PLAINTEXT://{bootstrap}", KAFKA_VERSION=kafka_version,
               KAFKA_ROOT=str(no_kafka_install))
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("KAFKAPY_TEST_BOOTSTRAP", None)
    try:
        proc = subprocess.run(cmd, cwd=source_root, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        tail = (exc.stdout or "")[-3000:] if isinstance(exc.stdout, str) else ""
        raise AssertionError(f"kafka-python suite did not finish within {timeout:.0f} s\n{tail}") from None
    if not junit.exists():
        raise AssertionError(f"kafka-python suite produced no report (exit {proc.returncode}):\n"
                             f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    (SUMMARY_DIR / "kafka-python-suite.log").write_text(proc.stdout + "\n" + proc.stderr)
    result = parse_junit(junit)
    result.returncode = proc.returncode
    result.output_tail = "\n".join(proc.stdout.splitlines()[-60:])
    return result


def _has_pytest_timeout() -> bool:
    try:
        importlib.metadata.version("pytest-timeout")
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


def summarize(result: SuiteResult, entries: list[AllowEntry], bootstrap: str, kafka_version: str) -> tuple[str, list[str]]:
    """Human-readable summary and the failures that are not allow-listed."""
    unexpected = [n for n in result.failed if allowed_by(n, entries) is None]
    allowed = [n for n in result.failed if allowed_by(n, entries) is not None]
    passing_but_allowed = [n for n in result.passed if allowed_by(n, entries) is not None]
    lines = [
        f"kafka-python {installed_kafka_python_version()} integration suite against {bootstrap} "
        f"(KAFKA_VERSION={kafka_version})",
        f"kafka-python-suite: {result.counts()}",
        f"not run: {', '.join(NOT_RUN_MODULES)} (they spawn their own SSL/SASL Kafka)",
        f"failed, allow-listed: {len(allowed)}; failed, NOT allow-listed: {len(unexpected)}",
    ]
    if unexpected:
        lines.append("\nUnexpected failures:")
        lines += [f"  {n}: {result.messages.get(n, '')}" for n in unexpected]
    if allowed:
        lines.append("\nAllow-listed failures:")
        lines += [f"  {n}  ({allowed_by(n, entries).reason})" for n in allowed]
    if passing_but_allowed:
        lines.append("\nAllow-listed but now passing (remove from conformance/kafka_python_allow.txt):")
        lines += [f"  {n}" for n in passing_but_allowed]
    if result.skipped:
        lines.append("\nSkipped:")
        lines += [f"  {n}: {reason}" for n, reason in result.skipped]
    return "\n".join(lines) + "\n", unexpected


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bootstrap", help="host:port of a running broker")
    parser.add_argument("--kafka-version", default=DEFAULT_KAFKA_VERSION)
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments, e.g. -k produce")
    args = parser.parse_args(argv)
    result = run_suite(args.bootstrap, args.kafka_version, args.pytest_args)
    text, unexpected = summarize(result, load_allow_list(), args.bootstrap, args.kafka_version)
    (SUMMARY_DIR / "kafka-python-suite.txt").write_text(text)
    print(text)
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
