#!/usr/bin/env python3
"""Before/after benchmark of two git refs in one session, side by side, reported as ratios.

    python bench/compare_refs.py BEFORE_REF AFTER_REF [--rounds N] [--quick]

Each ref is checked out in a detached git worktree under a temporary directory (removed at the end,
also on failure or Ctrl-C). Each round runs, for each benchmark, one side then the other, the order
flipping every round (before/after, after/before, ...: ABBA, so slow drift on the machine hits both
sides alike):

  * broker: bench/broker/bench_broker.py --brokers kafkapy: single-node produce and consume with
    confluent-kafka, {1, 8 partitions} x {100 B, 1 KiB} x {acks=1, acks=all};
  * cluster: bench/cluster/bench_cluster.py --skip-failover: 3 brokers in ZooKeeper mode (a real
    ZooKeeper), produce and consume for RF1 acks=1, RF3 acks=1 and RF3 acks=all;
  * startup: bench/broker/serve_startup.py: spawn of `python -m kafkapy serve` to its first
    ApiVersions answer, median of several starts.

Which code runs where: the bench scripts put their own checkout first on sys.path and start brokers
from it (`python -m kafkapy` with cwd = that checkout), so PYTHONPATH alone would not select the
ref. The scripts therefore run from inside each ref's worktree, with PYTHONPATH = that worktree.
By default each side runs its own bench/ (--bench-scripts own): the scripts import launchers from
their tree (kafkapy.devcluster, conformance/), whose names change between refs, so one copy cannot
serve every pair. The bench/ files that differ between the two refs are listed in the report; to
force one common copy on both sides use --bench-scripts current (this checkout's bench/) or a ref.
serve_startup.py is self-contained and always runs from this checkout. While a benchmark runs, the
broker processes it started are looked up in /proc and the kafkapy each of them imports (its cwd
for `-m`, else its PYTHONPATH) must be in that side's worktree.

Wall-clock rates here move with the machine's load (client and broker share its cores). For the
consume path, bench/broker/consume_cpu.py compares the broker's CPU per consumed record instead,
and bench/broker/fetch_path_cpu.py the Python fetch path's CPU per Fetch request, in-process.

Output: one markdown table per benchmark (before median, after median, ratio; rows that issue 21's
"No slower" names are marked) on stdout and in build/bench/compare-<before>-<after>.md, and every
run's raw numbers in build/bench/compare-<before>-<after>.json. The ratio is "after vs before" in
the better direction: after/before for rates, before/after for times, so >= 1 means after is no
slower and the issue's bar is >= 0.95.

    python bench/compare_refs.py 826f06d HEAD                 # full run
    python bench/compare_refs.py 826f06d HEAD --quick         # short smoke run (same code: noise level)
    python bench/compare_refs.py 826f06d HEAD --only startup --rounds 6
    python bench/compare_refs.py 826f06d HEAD --bench-scripts current   # this checkout's bench/ on both sides
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import platform
import shutil
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
BENCH_DIR = REPO_ROOT / "bench"
SERVE_STARTUP = BENCH_DIR / "broker" / "serve_startup.py"
OUT_DIR = REPO_ROOT / "build" / "bench"
TAG_ENV = "KAFKAPY_COMPARE_TAG"  # set for every child: finds (and stops) whatever a run left behind
SESSION = uuid.uuid4().hex[:12]  # every tag of this invocation starts with it
SAMPLE_INTERVAL_S = 1.0
PIN_SAMPLE_INTERVAL_S = 0.05  # with --pin: a new broker (and its threads) is moved to its core this soon
# --pin: the single-node bench's broker on one core, the client (bench script, librdkafka's threads)
# on the other, so the scheduler's sharing of two cores stops deciding the consume rate
PIN: dict[str, set[int]] = {}
BAR = 0.95  # issue 21: each after/before ratio >= 0.95
BENCHES = ("startup", "broker", "cluster")

# (arguments, timeout in seconds) per benchmark, full and --quick.
SETTINGS = {
    False: {
        "startup": (["--runs", "7", "--warmup", "1"], 300),
        "broker": (["--brokers", "kafkapy", "--repeat", "3", "--startup-runs", "3", "--records", "300000",
                    "--seconds", "10"], 1200),
        "cluster": (["--skip-failover", "--repeat", "3", "--records", "300000", "--seconds", "10",
                     "--quiet-wait", "5"], 1500),
    },
    True: {
        "startup": (["--runs", "5", "--warmup", "1"], 180),
        "broker": (["--brokers", "kafkapy", "--repeat", "1", "--startup-runs", "1", "--records", "100000",
                    "--seconds", "3"], 420),
        "cluster": (["--skip-failover", "--quick"], 600),
    },
}
DEFAULT_ROUNDS = {False: 4, True: 2}

# Rows issue 21's "No slower" asks for.
HEADLINE = {
    "produce 8 part, 100 B, acks=1", "produce 8 part, 1 KiB, acks=1",
    "consume 8 part, 100 B, acks=1", "consume 8 part, 1 KiB, acks=1",
    "produce RF3, acks=all",
    "spawn -> first ApiVersions answer",
}


class Interrupted(Exception):
    """SIGTERM or SIGINT arrived: unwind so that brokers and worktrees are cleaned up."""


@dataclass
class Side:
    label: str  # "before" or "after"
    ref: str
    commit: str
    tree: Path


@dataclass
class Run:
    """One benchmark run for one side in one round."""

    bench: str
    side: str
    round: int
    command: list[str]
    seconds: float = 0.0
    load_avg_1m: float | None = None  # machine load when the run started
    returncode: int | None = None
    error: str | None = None
    metrics: dict[str, float] = field(default_factory=dict)  # metric -> value (rate in rec/s, or seconds)
    kinds: dict[str, str] = field(default_factory=dict)  # metric -> "rate" | "time"
    metric_errors: dict[str, str] = field(default_factory=dict)
    brokers_seen: dict[str, str] = field(default_factory=dict)  # pid -> kafkapy tree it imports
    wrong_tree: list[str] = field(default_factory=list)
    raw: dict | None = None
    output_tail: str = ""


# -- git ---------------------------------------------------------------------------------------------------


def git(*args: str, cwd: Path = REPO_ROOT, timeout: float = 120) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          check=False)
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout.strip()


def resolve(ref: str) -> str:
    return git("rev-parse", "--verify", f"{ref}^{{commit}}")


def add_worktree(path: Path, commit: str) -> None:
    git("worktree", "add", "--detach", str(path), commit, timeout=300)


def remove_worktree(path: Path) -> None:
    try:
        git("worktree", "remove", "--force", str(path), timeout=120)
    except (RuntimeError, subprocess.SubprocessError) as error:
        print(f"warning: {error}", file=sys.stderr)
    shutil.rmtree(path, ignore_errors=True)


def install_bench_scripts(tree: Path, source: str) -> None:
    """Replace the worktree's bench/ with the common copy both sides run."""
    if source == "own":
        return
    shutil.rmtree(tree / "bench", ignore_errors=True)
    if source == "current":
        shutil.copytree(BENCH_DIR, tree / "bench", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        return
    archive = subprocess.run(["git", "archive", resolve(source), "bench"], cwd=REPO_ROOT, capture_output=True,
                             timeout=120, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True, timeout=120)


# -- child processes -----------------------------------------------------------------------------------------


def child_env(tree: Path, tag: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # brokers start from cached bytecode, as installed ones do
    env.pop("PYTHONSAFEPATH", None)
    env["PYTHONPATH"] = str(tree)
    env[TAG_ENV] = tag
    return env


def _environ(pid: str) -> dict[str, str] | None:
    try:
        with open(f"/proc/{pid}/environ", "rb") as raw:
            items = raw.read().split(b"\0")
    except OSError:
        return None
    env = {}
    for item in items:
        key, sep, value = item.partition(b"=")
        if sep:
            env[key.decode(errors="replace")] = value.decode(errors="replace")
    return env


def tagged_pids(prefix: str) -> list[int]:
    """Processes whose environment carries a tag starting with `prefix`: started by us, directly or not."""
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != os.getpid():
            env = _environ(pid)
            if env is not None and env.get(TAG_ENV, "").startswith(prefix):
                found.append(int(pid))
    return found


def broker_tree(pid: int, env: dict[str, str]) -> str | None:
    """The kafkapy checkout a `python -m kafkapy serve` process imports: its cwd comes first on sys.path."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as raw:
            argv = [a.decode(errors="replace") for a in raw.read().split(b"\0") if a]
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return None
    if "serve" not in argv or "kafkapy" not in argv or "-m" not in argv:
        return None
    for entry in [cwd, *env.get("PYTHONPATH", "").split(os.pathsep)]:
        if entry and (Path(entry) / "kafkapy" / "__init__.py").is_file():
            return str(Path(entry).resolve())
    return "<none found>"


class BrokerWatch(threading.Thread):
    """Records, while a benchmark runs, which kafkapy tree each broker it started imports."""

    def __init__(self, tag: str, pin_brokers: set[int] | None = None) -> None:
        super().__init__(daemon=True)
        self.tag = tag
        self.pin_brokers = pin_brokers
        self.seen: dict[str, str] = {}
        self.foreign: set[str] = set()  # not ours: never looked at again
        self.done = threading.Event()

    def _pin(self) -> None:
        """Every thread of every broker seen onto the brokers' cores (threads made later by a pinned
        thread inherit its affinity; this catches those made before)."""
        for pid in self.seen:
            try:
                for tid in os.listdir(f"/proc/{pid}/task"):
                    if os.sched_getaffinity(int(tid)) != self.pin_brokers:
                        os.sched_setaffinity(int(tid), self.pin_brokers)
            except OSError:
                continue  # the broker or the thread is gone

    def run(self) -> None:
        interval = SAMPLE_INTERVAL_S if self.pin_brokers is None else PIN_SAMPLE_INTERVAL_S
        while not self.done.wait(interval):
            if self.pin_brokers is not None:
                self._pin()
            for pid in os.listdir("/proc"):
                if not pid.isdigit() or pid in self.seen or pid in self.foreign:
                    continue
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as raw:
                        if b"kafkapy" not in raw.read():
                            continue
                except OSError:
                    continue
                env = _environ(pid)
                if env is None or env.get(TAG_ENV) != self.tag:
                    self.foreign.add(pid)  # the tag comes with exec, which for our children precedes "kafkapy"
                    continue
                tree = broker_tree(int(pid), env)
                if tree is not None:
                    self.seen[pid] = tree


def stop_leftovers(prefix: str) -> list[int]:
    """SIGTERM, then SIGKILL, every process still carrying a tag starting with `prefix`; returns their pids."""
    pids = tagged_pids(prefix)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 10
    while pids and time.monotonic() < deadline and tagged_pids(prefix):
        time.sleep(0.2)
    for pid in tagged_pids(prefix):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return pids


def run_child(run: Run, side: Side, timeout_s: float, log_path: Path) -> None:
    """Run one benchmark command from inside the side's worktree; bounded; cleans up after itself."""
    tag = f"{SESSION}/{side.label}-{run.bench}-{run.round}"
    pin = PIN if run.bench == "broker" else {}
    watch = BrokerWatch(tag, pin.get("broker"))
    watch.start()
    started = time.monotonic()
    run.load_avg_1m = os.getloadavg()[0]
    proc = None
    try:
        with open(log_path, "wb") as log:
            client_cores = pin.get("client")
            proc = subprocess.Popen(run.command, cwd=side.tree, env=child_env(side.tree, tag),
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True, preexec_fn=None if client_cores is None else (
                                        lambda: os.sched_setaffinity(0, client_cores)))
            try:
                run.returncode = proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                run.error = f"timed out after {timeout_s:.0f} s"
    finally:
        if proc is not None and proc.poll() is None:
            # SIGINT first: the bench scripts stop their brokers in `finally`; then the whole group.
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        watch.done.set()
        watch.join(5)
        left = stop_leftovers(tag)
        run.seconds = time.monotonic() - started
        if left:
            print(f"    note: stopped {len(left)} process(es) the run left behind: {left}", file=sys.stderr)
    run.brokers_seen = dict(watch.seen)
    run.wrong_tree = sorted({t for t in watch.seen.values() if Path(t) != side.tree.resolve()})
    run.output_tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-25:])
    if run.returncode not in (0, None) and run.error is None:
        run.error = f"exit code {run.returncode}"
    if run.wrong_tree:
        run.error = (run.error + "; " if run.error else "") + f"brokers imported {run.wrong_tree}, not {side.tree}"


# -- the benchmarks ------------------------------------------------------------------------------------------


EXTRA_ARGS: dict[str, list[str]] = {}  # --extra BENCH="ARGS": appended, so they win over SETTINGS


def command_for(bench: str, side: Side, quick: bool, json_path: Path) -> list[str]:
    args, _ = SETTINGS[quick][bench]
    args = [*args, *EXTRA_ARGS.get(bench, [])]
    script = {
        "startup": SERVE_STARTUP,  # self-contained; measures the tree PYTHONPATH names
        "broker": side.tree / "bench" / "broker" / "bench_broker.py",
        "cluster": side.tree / "bench" / "cluster" / "bench_cluster.py",
    }[bench]
    return [sys.executable, str(script), *args, "--json", str(json_path)]


def _rate(phase: dict) -> float | None:
    return phase["records"] / phase["seconds"] if phase.get("seconds") else None


def read_metrics(run: Run, json_path: Path) -> None:
    """Pull the compared numbers out of a benchmark's JSON; errors per metric stay visible."""
    try:
        raw = json.loads(json_path.read_text())
    except (OSError, ValueError) as error:
        run.error = run.error or f"no results: {error}"
        return
    run.raw = raw
    if run.bench == "startup":
        if raw.get("median_s") is not None:
            run.metrics["spawn -> first ApiVersions answer"] = raw["median_s"]
            run.metrics["spawn -> first TCP accept"] = raw["accept_median_s"]
        if raw.get("error"):
            run.metric_errors["spawn -> first ApiVersions answer"] = raw["error"].splitlines()[0]
        for name in run.metrics:
            run.kinds[name] = "time"
    elif run.bench == "broker":
        result = next((r for r in raw.get("results", []) if r.get("name") == "kafkapy"), None)
        if result is None:
            run.error = run.error or "no kafkapy result"
            return
        if result.get("start_error"):
            run.error = run.error or f"broker did not start: {result['start_error']}"
        if result.get("api_ready_s"):
            run.metrics["bench_broker: start -> ApiVersions v0 answer"] = statistics.median(result["api_ready_s"])
            run.kinds["bench_broker: start -> ApiVersions v0 answer"] = "time"
        for phase_name in ("produce", "consume"):
            for label, phase in result.get(phase_name, {}).items():
                name = f"{phase_name} {label}"
                if phase.get("error"):
                    run.metric_errors[name] = phase["error"]
                    continue
                rates = [r for r in result.get("rates", {}).get(name, []) if r > 0]
                if rates:
                    run.metrics[name] = statistics.median(rates)
                    run.kinds[name] = "rate"
    elif run.bench == "cluster":
        for error in raw.get("cluster_errors", []):
            run.error = run.error or error
        for name, phases in raw.get("phases", {}).items():
            bad = [p["error"] for p in phases if p.get("error")]
            if bad:
                run.metric_errors[name] = bad[0]
                continue
            rates = [r for r in (_rate(p) for p in phases) if r]
            if rates:
                run.metrics[name] = statistics.median(rates)
                run.kinds[name] = "rate"


# -- report -----------------------------------------------------------------------------------------------


def _fmt(value: float | None, kind: str) -> str:
    if value is None:
        return "—"
    if kind == "time":
        return f"{value * 1000:.0f} ms"
    return f"{value / 1000:.1f}k rec/s"


def speed_ratio(before: float, after: float, kind: str) -> float:
    """>= 1 means after is at least as fast: after/before for a rate, before/after for a time."""
    return after / before if kind == "rate" else before / after


def render(runs: list[Run], sides: dict[str, Side], settings: dict) -> str:
    lines = [
        (f"Before: `{sides['before'].ref}` ({sides['before'].commit[:10]}); after: `{sides['after'].ref}` "
         f"({sides['after'].commit[:10]}). {settings['machine']}; {settings['rounds']} round(s), sides alternating "
         f"(ABBA); {settings['mode']} settings; took {settings['duration_s'] / 60:.1f} min."),
        "",
        ("Ratio = after vs before, in the better direction (rates: after/before; times: before/after): "
         f"≥ 1 means after is no slower; issue 21's bar is ≥ {BAR}. Medians over rounds (each round's value is "
         "that run's own median); \"per round\" is the range of the ratio within each round's pair. "
         "**Bold** rows are the ones issue 21 names."),
    ]
    titles = {"startup": "Start-up (bench/broker/serve_startup.py)",
              "broker": "Single node (bench/broker/bench_broker.py)",
              "cluster": "Cluster, 3 brokers, ZooKeeper mode (bench/cluster/bench_cluster.py --skip-failover)"}
    failing = []
    for bench in BENCHES:
        bench_runs = [r for r in runs if r.bench == bench]
        if not bench_runs:
            continue
        lines += ["", f"### {titles[bench]}", "",
                  "| metric | before | after | ratio | per round | runs |", "|---|---|---|---|---|---|"]
        names: list[str] = []
        for run in bench_runs:
            names += [n for n in [*run.metrics, *run.metric_errors] if n not in names]
        for name in names:
            kind = next((r.kinds[name] for r in bench_runs if name in r.kinds), "rate")
            values = {label: [r.metrics[name] for r in bench_runs if r.side == label and name in r.metrics]
                      for label in ("before", "after")}
            pairs = []
            for round_ in sorted({r.round for r in bench_runs}):
                pair = {r.side: r.metrics.get(name) for r in bench_runs if r.round == round_}
                if pair.get("before") and pair.get("after"):
                    pairs.append(speed_ratio(pair["before"], pair["after"], kind))
            before = statistics.median(values["before"]) if values["before"] else None
            after = statistics.median(values["after"]) if values["after"] else None
            ratio = speed_ratio(before, after, kind) if before and after else None
            errors = sum(1 for r in bench_runs if name in r.metric_errors)
            headline = name in HEADLINE
            if headline and (ratio is None or ratio < BAR):
                failing.append(name)
            label = f"**{name}**" if headline else name
            ratio_text = "—" if ratio is None else f"{ratio:.3f}" + (" ✗" if headline and ratio < BAR else "")
            per_round = f"{min(pairs):.2f}–{max(pairs):.2f}" if pairs else "—"
            count = f"{len(values['before'])}+{len(values['after'])}" + (f", {errors} failed" if errors else "")
            lines.append(f"| {label} | {_fmt(before, kind)} | {_fmt(after, kind)} | {ratio_text} | {per_round} | "
                         f"{count} |")
    problems = [f"{r.bench} {r.side} round {r.round + 1}: {r.error}" for r in runs if r.error]
    problems += [f"{r.bench} {r.side} round {r.round + 1}: {n}: {e}" for r in runs for n, e in r.metric_errors.items()]
    checked = {label: sorted({t for r in runs if r.side == label for t in r.brokers_seen.values()})
               for label in ("before", "after")}
    seen = {label: sum(len(r.brokers_seen) for r in runs if r.side == label) for label in ("before", "after")}
    lines += ["", (f"Brokers checked in /proc: before {seen['before']} process(es) importing "
                   f"{checked['before']}; after {seen['after']} importing {checked['after']}.")]
    lines.append("Issue 21 rows below the bar: " + (", ".join(failing) if failing else "none") + ".")
    lines.append(f"Bench scripts: {settings['bench_scripts']}; bench/ files that differ between the refs: "
                 + (", ".join(settings["bench_diff"]) if settings["bench_diff"] else "none") + ".")
    if problems:
        lines += ["", "Problems:"] + [f"- {p}" for p in problems[:20]]
    return "\n".join(lines)


# -- main -------------------------------------------------------------------------------------------------


def _on_signal(signum, _frame) -> None:
    raise Interrupted(signal.Signals(signum).name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", help="git ref of the baseline")
    parser.add_argument("after", help="git ref to compare against it")
    parser.add_argument("--rounds", type=int, help="rounds; each runs every benchmark on both sides (default 4, "
                        "--quick 2)")
    parser.add_argument("--quick", action="store_true", help="short phases, 1 repetition: a smoke run (~6 min)")
    parser.add_argument("--only", default=",".join(BENCHES), help=f"comma-separated subset of {','.join(BENCHES)}")
    parser.add_argument("--bench-scripts", default="own", metavar="own|current|REF",
                        help="which bench/ each side runs: its own (default), this checkout's, or a ref's")
    parser.add_argument("--out", type=Path, help="output stem (default build/bench/compare-<before>-<after>)")
    parser.add_argument("--extra", action="append", default=[], metavar="BENCH=ARGS",
                        help="more arguments for one benchmark's script, after the defaults (so they win), "
                             "e.g. --extra broker='--records 1000000 --repeat 1' --extra startup='--site clean'")
    parser.add_argument("--pin", action="store_true",
                        help="single-node bench: its broker on CPU 0, the client on CPU 1 (the rest of "
                             "the machine's CPUs are left out of both)")
    args = parser.parse_args(argv)
    if args.pin:
        if len(os.sched_getaffinity(0)) < 2:
            parser.error("--pin needs two CPUs")
        first, second = sorted(os.sched_getaffinity(0))[:2]
        PIN.update(broker={first}, client={second})
    benches = [b.strip() for b in args.only.split(",") if b.strip()]
    for extra in args.extra:
        bench, sep, rest = extra.partition("=")
        if not sep or bench not in BENCHES:
            parser.error(f"--extra takes BENCH=ARGS with BENCH one of {', '.join(BENCHES)}: {extra!r}")
        EXTRA_ARGS.setdefault(bench, []).extend(shlex.split(rest))
    unknown = [b for b in benches if b not in BENCHES]
    if unknown:
        parser.error(f"unknown benchmark(s) {unknown}; known: {', '.join(BENCHES)}")
    rounds = args.rounds or DEFAULT_ROUNDS[args.quick]
    commits = {"before": resolve(args.before), "after": resolve(args.after)}
    stem = args.out or OUT_DIR / (f"compare-{commits['before'][:7]}-{commits['after'][:7]}"
                                  + ("-quick" if args.quick else ""))
    stem.parent.mkdir(parents=True, exist_ok=True)

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    started = time.monotonic()
    load_before = os.getloadavg()[0]
    work = Path(tempfile.mkdtemp(prefix="kafkapy-compare-"))
    sides: dict[str, Side] = {}
    runs: list[Run] = []
    interrupted = False
    try:
        for label in ("before", "after"):
            side = Side(label, getattr(args, label), commits[label], work / label)
            add_worktree(side.tree, side.commit)
            sides[label] = side
            install_bench_scripts(side.tree, args.bench_scripts)
            compileall.compile_dir(str(side.tree / "kafkapy"), quiet=1)
            found = subprocess.run([sys.executable, "-c", "import kafkapy; print(kafkapy.__file__)"],
                                   cwd=side.tree, env=child_env(side.tree, "check"), capture_output=True,
                                   text=True, timeout=60, check=False).stdout.strip()
            if not found.startswith(str(side.tree)):
                raise RuntimeError(f"{label}: kafkapy imports from {found!r}, not {side.tree}")
            print(f"[{label}] {side.ref} = {side.commit[:10]} in {side.tree}", file=sys.stderr)
        for round_ in range(rounds):
            order = ("before", "after") if round_ % 2 == 0 else ("after", "before")
            for bench in benches:
                for label in order:
                    side = sides[label]
                    json_path = work / f"{bench}-{label}-{round_}.json"
                    run = Run(bench, label, round_, command_for(bench, side, args.quick, json_path))
                    print(f"[round {round_ + 1}/{rounds}] {bench} {label} ...", file=sys.stderr)
                    run_child(run, side, SETTINGS[args.quick][bench][1], work / f"{bench}-{label}-{round_}.log")
                    read_metrics(run, json_path)
                    runs.append(run)
                    shown = ", ".join(f"{n} {_fmt(v, run.kinds[n])}" for n, v in run.metrics.items()
                                      if n in HEADLINE)
                    print(f"    {run.seconds:.0f} s; {shown or 'no headline numbers'}"
                          f"{'; ERROR ' + run.error if run.error else ''}", file=sys.stderr)
                    if run.error:
                        print("    " + run.output_tail.replace("\n", "\n    "), file=sys.stderr)
    except Interrupted as signal_name:
        print(f"interrupted by {signal_name}; cleaning up, no report written", file=sys.stderr)
        interrupted = True
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not skip the clean-up
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        stop_leftovers(SESSION)  # a run cut short in its own clean-up
        for side in sides.values():
            remove_worktree(side.tree)
        shutil.rmtree(work, ignore_errors=True)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if interrupted:
        return 130
    if not sides:
        return 1

    settings = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{os.cpu_count()} cores, 1-min load average {load_before:.1f} before and "
                   f"{os.getloadavg()[0]:.1f} after, Python {platform.python_version()}",
        "mode": ("--quick" if args.quick else "full") + "".join(
            f", {b} +`{shlex.join(a)}`" for b, a in EXTRA_ARGS.items() if b in benches) + (
            f", single-node broker pinned to CPU {sorted(PIN['broker'])} and its client to CPU {sorted(PIN['client'])}"
            if PIN else ""),
        "rounds": rounds,
        "bench_scripts": {"own": "each side its own bench/", "current": "this checkout's bench/ on both sides"}
                         .get(args.bench_scripts, f"bench/ of {args.bench_scripts} on both sides"),
        "bench_diff": git("diff", "--name-only", commits["before"], commits["after"], "--", "bench").split(),
        "bench_args": {b: [*SETTINGS[args.quick][b][0], *EXTRA_ARGS.get(b, [])] for b in benches},
        "duration_s": round(time.monotonic() - started, 1),
        "command": "python bench/compare_refs.py " + " ".join(argv if argv is not None else sys.argv[1:]),
    }
    markdown = render(runs, sides, settings)
    print(markdown)
    stem.with_suffix(".md").write_text(markdown + "\n")
    stem.with_suffix(".json").write_text(json.dumps({
        "settings": settings,
        "sides": {label: {"ref": s.ref, "commit": s.commit} for label, s in sides.items()},
        "runs": [asdict(r) for r in runs],
    }, indent=2, default=str) + "\n")
    print(f"written {stem.with_suffix('.md')} and {stem.with_suffix('.json')}", file=sys.stderr)
    return 1 if any(r.error for r in runs) or len(runs) < rounds * len(benches) * 2 else 0


if __name__ == "__main__":
    sys.exit(main())
