"""The Node cell of the client matrix: KafkaJS (pinned in package.json / package-lock.json) running scenarios.js.

prepare() runs `npm ci` from the committed lock file into a cache directory keyed by the lock
file's hash (~/.cache/kafkapy/node/<hash>/node_modules, shared by concurrent sessions under a file
lock), and the program finds it through NODE_PATH; nothing is installed into the checkout.
@confluentinc/kafka-javascript (1.10.1) is not a cell: its install downloads a prebuilt binary from
GitHub and, failing that, builds librdkafka from source, which downloads zlib and OpenSSL from
zlib.net/github.com; neither is reachable from npm alone.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

from conformance.matrix.cells import Cell, CellUnavailable

__all__ = ["CELLS", "expected_unsupported", "node_modules"]

NODE_DIR = Path(__file__).resolve().parent
CACHE_ROOT = Path(os.environ.get("KAFKAPY_NODE_CACHE", Path.home() / ".cache" / "kafkapy" / "node"))
PROGRAM_TIMEOUT_S = 300.0
NPM_TIMEOUT_S = 300.0

_UNSUPPORTED = {
    "produce_lz4": "KafkaJS has no lz4 codec without a native plugin (kafkajs-lz4 builds the lz4 addon)",
    "produce_zstd": "KafkaJS has no zstd codec without a native plugin (@kafkajs/zstd)",
}


def expected_unsupported(cell: Cell, scenario: str) -> str | None:
    """Why `scenario` is legitimately unsupported by this cell, or None if it must pass."""
    return _UNSUPPORTED.get(scenario)


def node_modules() -> Path:
    """The node_modules installed by `npm ci` from this directory's lock file (installed once, cached)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        raise CellUnavailable("node/npm not found on PATH (Debian: apt-get install -y nodejs npm)")
    lock_text = (NODE_DIR / "package-lock.json").read_bytes()
    key = hashlib.sha256((NODE_DIR / "package.json").read_bytes() + lock_text).hexdigest()[:16]
    home = CACHE_ROOT / key
    if (home / ".complete").is_file():
        return home / "node_modules"
    CACHE_ROOT.mkdir(parents=True, exist_ok=True)
    with open(CACHE_ROOT / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (home / ".complete").is_file():
            shutil.rmtree(home, ignore_errors=True)
            home.mkdir(parents=True)
            for name in ("package.json", "package-lock.json"):
                shutil.copy2(NODE_DIR / name, home / name)
            try:
                result = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts"], cwd=home,
                                        capture_output=True, text=True, timeout=NPM_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                shutil.rmtree(home, ignore_errors=True)
                raise CellUnavailable(f"npm ci did not finish within {NPM_TIMEOUT_S:.0f} s") from None
            if result.returncode != 0:
                shutil.rmtree(home, ignore_errors=True)
                raise CellUnavailable(f"npm ci failed: {(result.stdout + result.stderr).strip()[-1000:]}")
            (home / ".complete").write_text("ok\n")
    return home / "node_modules"


def _prepare() -> None:
    node_modules()


def _command(bootstrap: str, prefix: str) -> list[str]:
    # NODE_PATH points require() at the cached node_modules (env(1): Cell.env is fixed at import).
    return ["env", f"NODE_PATH={node_modules()}", shutil.which("node") or "node", str(NODE_DIR / "scenarios.js"),
            bootstrap, prefix]


def _cells() -> list[Cell]:
    version = json.loads((NODE_DIR / "package.json").read_text())["dependencies"]["kafkajs"]
    return [Cell("kafkajs", version, _command, prepare=_prepare, timeout_s=PROGRAM_TIMEOUT_S)]


CELLS: list[Cell] = _cells()
