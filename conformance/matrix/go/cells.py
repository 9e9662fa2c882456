"""The Go cells of the client matrix: franz-go, IBM/sarama (two protocol versions), segmentio/kafka-go
and confluent-kafka-go.

One Go module (go.mod and go.sum committed, modules from the Go module proxy into the module cache,
never vendored) with a program per client under cmd/. The programs are built once per source hash
(go.mod, go.sum, every .go file, `go version`) into the temp dir; concurrent sessions share it. The
pure-Go programs build with CGO_ENABLED=0; confluent-kafka-go needs cgo (it links the static
librdkafka inside its module, nothing is downloaded from outside the Go proxy) and builds apart, so
that a machine without a C compiler loses that cell only.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Callable

from conformance.matrix.cells import Cell, CellUnavailable

__all__ = ["CELLS", "SARAMA_PROTOCOLS", "build", "expected_unsupported"]

GO_DIR = Path(__file__).resolve().parent
PROGRAM_TIMEOUT_S = 300.0
BUILD_TIMEOUT_S = 900.0
# sarama speaks the protocol of the Kafka version its config.Version names: one old, one new.
SARAMA_PROTOCOLS = ("2.1.0", "3.6.0")
_NETWORK_MARKERS = ("dial tcp", "proxy.golang.org", "no such host", "i/o timeout", "connection refused",
                    "TLS handshake timeout", "missing go.sum entry")
_build_lock = threading.Lock()
_built: dict[str, Path] = {}


def _go() -> str:
    go = shutil.which("go") or ("/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK) else None)
    if not go:
        raise CellUnavailable("go not found on PATH or in /usr/local/go/bin (https://go.dev/dl/)")
    return go


def _module_version(module: str) -> str:
    match = re.search(rf"^\s*{re.escape(module)} (v\S+)", (GO_DIR / "go.mod").read_text(), re.MULTILINE)
    return match.group(1) if match else "unknown"


def _source_digest(go: str) -> str:
    digest = hashlib.sha256()
    version = subprocess.run([go, "version"], capture_output=True, text=True, timeout=60)
    digest.update(version.stdout.encode())
    for path in sorted([GO_DIR / "go.mod", GO_DIR / "go.sum", *GO_DIR.rglob("*.go")]):
        digest.update(str(path.relative_to(GO_DIR)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


# name -> (packages, CGO_ENABLED)
_VARIANTS = {"pure": (["./cmd/franz", "./cmd/sarama", "./cmd/kafkago"], "0"), "cgo": (["./cmd/confluent"], "1")}


def build(variant: str = "pure") -> Path:
    """The directory of the built programs of `variant` (pure: franz, sarama, kafkago; cgo: confluent)."""
    go = _go()
    key = f"{_source_digest(go)}-{variant}"
    with _build_lock:
        if key in _built:
            return _built[key]
        out = Path(tempfile.gettempdir()) / f"kafkapy-go-matrix-{key}"
        if not (out / ".complete").is_file():
            with open(Path(tempfile.gettempdir()) / f"kafkapy-go-matrix-{key}.lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                if not (out / ".complete").is_file():
                    _build_into(go, out, variant)
        _built[key] = out
        return out


def _build_into(go: str, out: Path, variant: str) -> None:
    packages, cgo = _VARIANTS[variant]
    staging = Path(tempfile.mkdtemp(prefix="kafkapy-go-build-"))
    env = {**os.environ, "GOFLAGS": "-mod=readonly", "CGO_ENABLED": cgo}
    try:
        result = subprocess.run([go, "build", "-trimpath", "-o", str(staging) + os.sep, *packages], cwd=GO_DIR,
                                capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired:
        shutil.rmtree(staging, ignore_errors=True)
        raise CellUnavailable(f"go build did not finish within {BUILD_TIMEOUT_S:.0f} s") from None
    if result.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        message = (result.stdout + result.stderr).strip()[-2000:]
        if any(marker in message for marker in _NETWORK_MARKERS):
            raise CellUnavailable(f"go modules could not be downloaded: {message}")
        if cgo == "1" and ("gcc" in message or "cgo" in message):
            raise CellUnavailable(f"the cgo build needs a C compiler (Debian: apt-get install -y gcc): {message}")
        raise RuntimeError(f"go build of conformance/matrix/go ({variant}) failed:\n{message}")
    (staging / ".complete").write_text("ok\n")
    shutil.rmtree(out, ignore_errors=True)
    try:
        staging.rename(out)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)  # another session built it first


def _prepare() -> None:
    build("pure")


def _prepare_cgo() -> None:
    build("cgo")


def _program(name: str, *flags: str, variant: str = "pure") -> Callable[[str, str], list[str]]:
    def command(bootstrap: str, prefix: str) -> list[str]:
        return [str(build(variant) / name), *flags, bootstrap, prefix]
    return command


# Scenarios a Go client has no API for, by cell name prefix.
_UNSUPPORTED: dict[str, dict[str, str]] = {
    "segmentio/kafka-go": {
        "transactions": "kafka-go has no transactional producer",
        "error_fenced_producer": "kafka-go has no transactional producer",
    },
}


def expected_unsupported(cell: Cell, scenario: str) -> str | None:
    """Why `scenario` is legitimately unsupported by this cell, or None if it must pass."""
    return _UNSUPPORTED.get(cell.client, {}).get(scenario)


def _cells() -> list[Cell]:
    cells = [Cell("franz-go", _module_version("github.com/twmb/franz-go"), _program("franz"), prepare=_prepare,
                  timeout_s=PROGRAM_TIMEOUT_S)]
    sarama = _module_version("github.com/IBM/sarama")
    for protocol in SARAMA_PROTOCOLS:
        cells.append(Cell("IBM/sarama", f"{sarama}+kafka{protocol}", _program("sarama", "-kafka-version", protocol),
                          prepare=_prepare, timeout_s=PROGRAM_TIMEOUT_S))
    cells.append(Cell("segmentio/kafka-go", _module_version("github.com/segmentio/kafka-go"), _program("kafkago"),
                      prepare=_prepare, timeout_s=PROGRAM_TIMEOUT_S))
    cells.append(Cell("confluent-kafka-go", _module_version("github.com/confluentinc/confluent-kafka-go/v2"),
                      _program("confluent", variant="cgo"), prepare=_prepare_cgo, timeout_s=PROGRAM_TIMEOUT_S))
    return cells


CELLS: list[Cell] = _cells()
