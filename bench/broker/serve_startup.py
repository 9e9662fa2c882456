#!/usr/bin/env python3
"""Start-up time of `python -m kafkapy serve`: spawn to the first ApiVersions answer, over N starts.

Each start is a fresh single-node broker on a free 127.0.0.1 port with a new temporary log dir
(`--override listeners=... log.dirs=...`, the argv the conformance tests use). The clock starts just
before Popen and stops when a whole ApiVersions v3 answer (error 0) has been read: a listener that
accepts but cannot answer yet does not count. Then the broker gets SIGTERM (SIGKILL after a bound)
and its directory is removed.

The broker measured is the kafkapy tree this process would import (PYTHONPATH first, as usual): the
child runs from that tree's root, so `python -m kafkapy` imports exactly it, whatever the current
directory. That tree's bytecode is compiled first and PYTHONDONTWRITEBYTECODE is dropped for the
children, so every start reads cached bytecode as an installed broker would. This script needs
nothing from kafkapy itself (the request is encoded here), so it measures older trees as well.

    PYTHONPATH=/path/to/tree python bench/broker/serve_startup.py            # 7 starts
    PYTHONPATH=/path/to/tree python bench/broker/serve_startup.py --runs 15 --json build/bench/startup.json

Prints one line per start, then median/min/max, then one JSON line (also written to --json).

`--site clean` runs the brokers with an interpreter whose `site` executes no `.pth` hooks: a
throw-away venv whose only `.pth` names this interpreter's site-packages as a plain path, as a
`pip install kafkapy` into a fresh venv would have it. `--site machine` (the default) runs this
interpreter as it is, with whatever hooks its site-packages carries (here: the editable install's
path finder, and a certifi hook of the sandbox), which all run before kafkapy's first line.
`--site editable` is the clean venv plus kafkapy's own `pip install -e .` hook (copied from this
interpreter): the README's `pip install -e . && kafkapy serve` on a machine without the sandbox's
hook.
Either way the floor is measured too: the same interpreter spawned to exit with `-c pass`, and
with `-c "import asyncio, uvloop"` (what any asyncio broker imports), so the report can tell the
interpreter's share from kafkapy's.
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

READY_TIMEOUT_S = 20.0  # one start; a broker slower than this is a failure, not a sample
STOP_TIMEOUT_S = 10.0  # SIGTERM to exit; then SIGKILL
RETRY_SLEEP_S = 0.002  # between connection attempts while the port is not open yet
GOAL_S = 0.15  # issue 21: first request answered within 0.15 s of the spawn (median)

API_VERSIONS_KEY = 18
API_VERSIONS_VERSION = 3  # flexible: request header v2; the response header stays v0 for ApiVersions


class StartFailed(RuntimeError):
    """The broker exited, or did not answer within READY_TIMEOUT_S."""


def kafkapy_tree() -> Path:
    """The checkout whose kafkapy this interpreter imports (found without importing it)."""
    spec = importlib.util.find_spec("kafkapy")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("kafkapy is not importable: set PYTHONPATH to a kafkapy checkout")
    return Path(next(iter(spec.submodule_search_locations))).resolve().parent


def child_env(tree: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # the children must use (and keep) cached bytecode
    env.pop("PYTHONSAFEPATH", None)  # `-m` must put the tree root (the cwd) first on sys.path
    env["PYTHONPATH"] = os.pathsep.join([str(tree), *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]])
    return env


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _compact_string(value: bytes) -> bytes:
    return bytes([len(value) + 1]) + value  # uvarint length + 1; short strings fit one byte


def api_versions_request(correlation_id: int) -> bytes:
    """A framed ApiVersions v3 request (header v2, then the flexible body)."""
    client_id = b"serve-startup"
    header = struct.pack(">hhih", API_VERSIONS_KEY, API_VERSIONS_VERSION, correlation_id, len(client_id))
    header += client_id + b"\x00"  # no tagged fields
    body = _compact_string(b"kafkapy-bench") + _compact_string(b"1") + b"\x00"
    return struct.pack(">i", len(header) + len(body)) + header + body


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("connection closed before the whole answer arrived")
        data += chunk
    return bytes(data)


def ask_api_versions(sock: socket.socket, correlation_id: int) -> None:
    """Send ApiVersions v3 and read its whole answer; error_code must be 0."""
    sock.sendall(api_versions_request(correlation_id))
    (size,) = struct.unpack(">i", _recv_exactly(sock, 4))
    frame = _recv_exactly(sock, size)
    answered_id, error_code = struct.unpack(">ih", frame[:6])
    if answered_id != correlation_id or error_code != 0:
        raise StartFailed(f"ApiVersions answered correlation id {answered_id}, error {error_code}")


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM, wait a bounded time, then SIGKILL the broker's whole session."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pass
    try:  # start_new_session: the group id is the broker's pid; takes any child with it
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        print(f"  warning: broker pid {proc.pid} did not go away after SIGKILL", file=sys.stderr)


def clean_site_python(work_dir: Path, editable: bool = False) -> str:
    """An interpreter like this one whose `site` runs no `.pth` hooks (see --site clean): a venv
    without pip whose one `.pth` line is this interpreter's site-packages as a plain path. With
    `editable`, the venv also gets this machine's `pip install -e .` hook of kafkapy (its `.pth` and
    path finder module, copied): what the README's `pip install -e . && kafkapy serve` runs."""
    import site
    import sysconfig

    venv = work_dir / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    paths = dict.fromkeys([*site.getsitepackages(), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    Path(purelib, "_serve_startup_deps.pth").write_text("".join(f"{p}\n" for p in paths))
    if editable:
        hooks = [hook for directory in paths for hook in Path(directory).glob("__editable__*kafkapy*")]
        if not any(hook.suffix == ".pth" for hook in hooks):
            raise SystemExit("--site editable: no `pip install -e .` hook of kafkapy in this interpreter's site-packages")
        for hook in hooks:
            shutil.copy(hook, Path(purelib, hook.name))
    return str(python)


def spawn_to_exit(python: str, code: str, env: dict[str, str], runs: int) -> float:
    """Median seconds from spawn to exit of `python -c code` (the interpreter's own floor)."""
    times = []
    for _ in range(runs + 1):
        started = time.perf_counter()
        subprocess.run([python, "-c", code], env=env, check=True, stdin=subprocess.DEVNULL)
        times.append(time.perf_counter() - started)
    return statistics.median(times[1:])


def one_start(tree: Path, env: dict[str, str], index: int, python: str = sys.executable) -> tuple[float, float]:
    """Spawn one broker; return (seconds to a TCP accept, seconds to the ApiVersions answer)."""
    work_dir = Path(tempfile.mkdtemp(prefix="kafkapy-serve-startup-"))
    port = free_port()
    listener = f"PLAINTEXT://127.0.0.1:{port}"
    argv = [python, "-m", "kafkapy", "serve",
            "--override", f"listeners={listener}", "--override", f"advertised.listeners={listener}",
            "--override", f"log.dirs={work_dir / 'data'}"]
    log_path = work_dir / "broker.log"
    proc = None
    try:
        with open(log_path, "wb") as log:
            spawned = time.perf_counter()
            proc = subprocess.Popen(argv, cwd=tree, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        deadline = spawned + READY_TIMEOUT_S
        accepted = None
        attempt = 0
        while True:
            now = time.perf_counter()
            if now > deadline:
                raise StartFailed(f"no ApiVersions answer within {READY_TIMEOUT_S:.0f} s:\n{_tail(log_path)}")
            if proc.poll() is not None:
                raise StartFailed(f"broker exited with {proc.returncode}:\n{_tail(log_path)}")
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=deadline - now)
            except OSError:
                time.sleep(RETRY_SLEEP_S)
                continue
            with sock:
                accepted = accepted if accepted is not None else time.perf_counter() - spawned
                sock.settimeout(max(0.05, deadline - time.perf_counter()))
                attempt += 1
                try:
                    ask_api_versions(sock, attempt)
                except (OSError, ConnectionError, struct.error):
                    time.sleep(RETRY_SLEEP_S)  # accepting but not serving yet
                    continue
                return accepted, time.perf_counter() - spawned
    finally:
        if proc is not None:
            stop(proc)
        shutil.rmtree(work_dir, ignore_errors=True)


def _tail(path: Path, lines: int = 12) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as error:
        return f"<no log: {error}>"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="measured starts (default 7)")
    parser.add_argument("--warmup", type=int, default=1,
                        help="starts before the measured ones, not counted (default 1: file cache, bytecode)")
    parser.add_argument("--json", type=Path, help="also write the JSON result to this file")
    parser.add_argument("--site", choices=("machine", "clean", "editable"), default="machine",
                        help="machine: this interpreter with its site-packages' .pth hooks (default); clean: "
                             "a venv whose site runs no .pth hooks, as a regular install (see above); editable: "
                             "that venv plus kafkapy's `pip install -e .` hook only")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")

    tree = kafkapy_tree()
    if not compileall.compile_dir(str(tree / "kafkapy"), quiet=1):
        print("warning: some kafkapy modules did not compile", file=sys.stderr)
    env = child_env(tree)
    venv_dir = Path(tempfile.mkdtemp(prefix="kafkapy-serve-startup-venv-"))
    python = clean_site_python(venv_dir, editable=args.site == "editable") if args.site != "machine" else sys.executable
    print(f"kafkapy tree: {tree} (python {platform.python_version()}, site {args.site}, "
          f"load {os.getloadavg()[0]:.1f})", file=sys.stderr)

    accepts: list[float] = []
    answers: list[float] = []
    error = None
    try:
        for index in range(args.warmup + args.runs):
            accept_s, answer_s = one_start(tree, env, index, python)
            counted = index >= args.warmup
            if counted:
                accepts.append(accept_s)
                answers.append(answer_s)
            print(f"  start {index + 1}{'' if counted else ' (warm-up)'}: accept {accept_s * 1000:.0f} ms, "
                  f"ApiVersions answered {answer_s * 1000:.0f} ms", file=sys.stderr)
    except StartFailed as failure:
        error = str(failure)
        print(f"start failed: {error}", file=sys.stderr)
    floor_env = {k: v for k, v in env.items() if k != "PYTHONPATH"}
    floor_pass = spawn_to_exit(python, "pass", floor_env, args.runs)
    floor_asyncio = spawn_to_exit(python, "import asyncio, uvloop", floor_env, args.runs)
    shutil.rmtree(venv_dir, ignore_errors=True)

    result = {
        "metric": "serve_startup",
        "kafkapy_tree": str(tree),
        "python": platform.python_version(),
        "runs": len(answers),
        "answer_s": answers,
        "accept_s": accepts,
        "median_s": statistics.median(answers) if answers else None,
        "min_s": min(answers) if answers else None,
        "max_s": max(answers) if answers else None,
        "accept_median_s": statistics.median(accepts) if accepts else None,
        "goal_s": GOAL_S,
        "site": args.site,
        "interpreter_s": floor_pass,
        "interpreter_asyncio_uvloop_s": floor_asyncio,
        "load_avg_1m": os.getloadavg()[0],
        "error": error,
    }
    if answers:
        print(f"spawn -> first ApiVersions answer over {len(answers)} starts: median {result['median_s'] * 1000:.0f} ms, "
              f"min {result['min_s'] * 1000:.0f} ms, max {result['max_s'] * 1000:.0f} ms "
              f"(goal <= {GOAL_S * 1000:.0f} ms: {'met' if result['median_s'] <= GOAL_S else 'NOT met'}); "
              f"floor: interpreter {floor_pass * 1000:.0f} ms, with asyncio+uvloop {floor_asyncio * 1000:.0f} ms")
    print(json.dumps(result))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 1 if error else 0


if __name__ == "__main__":
    sys.exit(main())
