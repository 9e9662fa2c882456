#!/usr/bin/env python3
"""Share-group consume throughput, kafkapy side by side with real Kafka 4.4.0 KRaft (issue 31, Performance).

Two brokers on loopback, one after the other on the same box:
  kafkapy   one `python -m kafkapy serve` process (under bench/broker/profiled_serve.py, which costs
            nothing until it is signalled), a fresh log dir;
  kafka     Apache Kafka 4.4.0 in KRaft combined mode (conformance/real_kafka.py, jars from Maven
            Central), the authorizer off like kafkapy's default.
Both get the same properties: conformance/real_kafka.base_properties() (share coordinator state topic
RF 1 / min.isr 1 / 1 partition, group.initial.rebalance.delay.ms=0, offsets topic RF 1).

On each broker: a 1-partition and an 8-partition topic, each with --records records of --size bytes
(round-robin over the partitions), then for each topic share groups of 1, 3 and 10 members read every
record once: confluent-kafka ShareConsumer, implicit acknowledgement, group config
share.auto.offset.reset=earliest, a new group per cell, every member its own process (the worker and
the cell runner are bench/groups/share_consume.py's). Also a classic group (Consumer, consume(500)) of
the same sizes on kafkapy as the baseline. records/s is from the first record any member got to the
last (every record counted once). Every cell stops by itself after --cell-timeout s; a cell that did
not get every record is reported incomplete. The brokers and the members are stopped even on failure.

With --profile (default on) one extra, unmeasured share cell (8 partitions, 3 members by default) runs
on kafkapy with cProfile on in the broker's event loop; the top functions by cumulative and own time
are printed after the table (pstats file kept with --profile-out).

    python bench/share_groups/share_throughput.py                      # 200000 records of 100 bytes
    git archive 97594a1 | tar -x -C /tmp/before && \
        python bench/share_groups/share_throughput.py --baseline /tmp/before   # before/after in one run
    python bench/share_groups/share_throughput.py --records 20000 --members 1,3 --partitions 1 --no-kafka
"""
from __future__ import annotations

import argparse
import io
import json
import os
import pstats
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "bench" / "groups"))
sys.path.insert(0, str(REPO_ROOT))

import share_consume  # noqa: E402  (bench/groups/share_consume.py: the member worker and one cell's runner)

from conformance.real_kafka import REFERENCES, RealKafka, RealKafkaStartError, RealKafkaUnavailable, \
    base_properties  # noqa: E402

PROFILED_SERVE = REPO_ROOT / "bench" / "broker" / "profiled_serve.py"
KAFKA_REFERENCE = "kafka-4.4.0-kraft"
START_TIMEOUT_S = 30.0


def broker_properties() -> dict[str, str]:
    return base_properties("kraft", authorizer=False)


class Kafkapy:
    """`python -m kafkapy serve` (via profiled_serve.py) on a free loopback port and a fresh log dir."""

    def __init__(self, work: Path, tree: Path = REPO_ROOT, name: str = "kafkapy") -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.dir = work / name
        self.dir.mkdir(parents=True)
        self.prof = self.dir / "current.prof"
        listener = f"PLAINTEXT://127.0.0.1:{self.port}"
        serve = tree / PROFILED_SERVE.relative_to(REPO_ROOT)
        argv = [sys.executable, str(serve), str(self.prof), "serve",
                "--override", f"listeners={listener}", "--override", f"advertised.listeners={listener}",
                "--override", f"log.dirs={self.dir / 'data'}"]
        for key, value in broker_properties().items():
            argv += ["--override", f"{key}={value}"]
        env = dict(os.environ, PYTHONPATH=str(tree))
        self.log = open(self.dir / "broker.log", "wb")  # noqa: SIM115  closed in stop()
        self.proc = subprocess.Popen(argv, cwd=tree, env=env, stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        self.bootstrap = f"127.0.0.1:{self.port}"

    def wait_ready(self) -> None:
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            self._check_alive()
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1.0).close()
                break
            except OSError:
                time.sleep(0.05)
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        while time.monotonic() < deadline:
            self._check_alive()
            try:
                admin.list_topics(timeout=1.0)
                return
            except Exception:  # noqa: BLE001  not serving yet
                time.sleep(0.1)
        raise RuntimeError(f"kafkapy not ready in {START_TIMEOUT_S:.0f} s:\n{self.log_tail()}")

    def _check_alive(self) -> None:
        if self.proc.poll() is not None:
            raise RuntimeError(f"kafkapy exited with {self.proc.returncode}:\n{self.log_tail()}")

    def log_tail(self) -> str:
        return "\n".join((self.dir / "broker.log").read_text(errors="replace").splitlines()[-15:])

    def profile(self, on: bool) -> Path | None:
        os.kill(self.proc.pid, signal.SIGUSR1 if on else signal.SIGUSR2)
        if on:
            return None
        deadline = time.monotonic() + 30
        while not self.prof.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # dump_stats writes in one go; let it finish
        return self.prof if self.prof.exists() else None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait(10)
        self.log.close()


def produce_topics(bootstrap: str, partition_counts: list[int], records: int, size: int, deadline: float) -> float:
    """Create share-bench-<n>p topics and fill each with `records` records; returns the seconds taken."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    began = time.monotonic()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 262144})
    value = b"x" * size
    for count in partition_counts:
        topic = f"share-bench-{count}p"
        admin.create_topics([NewTopic(topic, count, 1)])[topic].result(30)
        for i in range(records):
            while True:
                try:
                    producer.produce(topic, value=value, partition=i % count)
                    break
                except BufferError:
                    producer.poll(0.05)
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"producing to {topic} did not finish in time")
        left = producer.flush(max(1.0, deadline - time.monotonic()))
        if left:
            raise RuntimeError(f"{left} records to {topic} not acknowledged in time")
    return time.monotonic() - began


def run_cells(broker: str, bootstrap: str, kinds: tuple[str, ...], partition_counts: list[int], sizes: list[int],
              records: int, budget_end: float) -> list[dict]:
    results = []
    for count in partition_counts:
        for members in sizes:
            for kind in kinds:
                cell = {"broker": broker, "kind": kind, "partitions": count, "members": members}
                if time.monotonic() > budget_end:
                    results.append({**cell, "complete": False, "rate": None, "skipped": "time budget spent"})
                    continue
                try:
                    result = share_consume._run(bootstrap, kind, f"share-bench-{count}p", members, records)
                except Exception as exc:  # noqa: BLE001  one cell failing does not end the run
                    result = {"complete": False, "rate": None, "error": f"{type(exc).__name__}: {exc}"}
                result.update(cell)
                results.append(result)
                print(json.dumps(result), file=sys.stderr, flush=True)
    return results


def profile_cell(kafkapy: Kafkapy, partitions: int, members: int, records: int, out: Path | None) -> str:
    kafkapy.profile(True)
    try:
        result = share_consume._run(kafkapy.bootstrap, "share", f"share-bench-{partitions}p", members, records)
    finally:
        prof = kafkapy.profile(False)
    if prof is None:
        return "(no profile written)"
    if out is not None:
        shutil.copy(prof, out)
    text = io.StringIO()
    stats = pstats.Stats(str(prof), stream=text)
    stats.strip_dirs().sort_stats("cumulative").print_stats(30)
    stats.sort_stats("tottime").print_stats(20)
    head = (f"profiled cell: kafkapy share, {partitions} partition(s), {members} member(s), "
            f"{result.get('rate') or 0:.0f} records/s under cProfile, complete={result.get('complete')}\n")
    return head + text.getvalue()


def _ratio(a: dict | None, b: dict | None) -> str:
    return f"{a['rate'] / b['rate']:.2f}" if a and b and a.get("rate") and b.get("rate") else "-"


def render(results: list[dict], sizes: list[int], partition_counts: list[int]) -> str:
    def rate(broker: str, kind: str, count: int, members: int) -> dict | None:
        for r in results:
            if (r["broker"], r["kind"], r["partitions"], r["members"]) == (broker, kind, count, members):
                return r
        return None

    def fmt(r: dict | None) -> str:
        if r is None:
            return "-"
        if not r.get("rate"):
            return "n/a (" + (r.get("skipped") or r.get("error") or f"{r.get('unique', 0)} records") + ")"
        flag = "" if r.get("complete") else f" (incomplete: {r.get('unique')})"
        redelivered = f", {r['redelivered']} redelivered" if r.get("redelivered") else ""
        return f"{r['rate']:.0f}{redelivered}{flag}"

    baseline = any(r["broker"] == "kafkapy-before" for r in results)
    lines = ["| partitions | members | kafkapy share rec/s | Kafka 4.4 share rec/s | kafkapy / Kafka "
             "| kafkapy classic rec/s | kafkapy share / classic |"
             + (" kafkapy before rec/s | before / Kafka | after / before |" if baseline else ""),
             "|---|---|---|---|---|---|---|" + ("---|---|---|" if baseline else "")]
    for count in partition_counts:
        for members in sizes:
            ours, theirs = rate("kafkapy", "share", count, members), rate("kafka", "share", count, members)
            before = rate("kafkapy-before", "share", count, members)
            classic = rate("kafkapy", "classic", count, members)
            ratio = (f"{ours['rate'] / theirs['rate']:.2f}" if ours and theirs and ours.get("rate") and theirs.get("rate")
                     else "-")
            vs_classic = (f"{ours['rate'] / classic['rate']:.2f}"
                          if ours and classic and ours.get("rate") and classic.get("rate") else "-")
            line = f"| {count} | {members} | {fmt(ours)} | {fmt(theirs)} | {ratio} | {fmt(classic)} | {vs_classic} |"
            if baseline:
                line += (f" {fmt(before)} | {_ratio(before, theirs)} | {_ratio(ours, before)} |")
            lines.append(line)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=200000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--members", default="1,3,10", help="share group sizes (default 1,3,10)")
    parser.add_argument("--partitions", default="1,8", help="partition counts of the topics (default 1,8)")
    parser.add_argument("--cell-timeout", type=float, default=60.0, help="seconds one cell may take (default 60)")
    parser.add_argument("--budget", type=float, default=540.0,
                        help="seconds for the whole run; cells not started by then are skipped (default 540)")
    parser.add_argument("--no-kafka", action="store_true", help="kafkapy only")
    parser.add_argument("--baseline", type=Path,
                        help="another kafkapy source tree (e.g. `git archive <rev> | tar -x -C DIR`) run the same "
                             "way first, as 'kafkapy before': a before/after comparison in one run")
    parser.add_argument("--no-classic", action="store_true", help="no classic-group baseline")
    parser.add_argument("--no-profile", dest="profile", action="store_false")
    parser.add_argument("--profile-cell", default="8,3", help="partitions,members of the profiled cell (default 8,3)")
    parser.add_argument("--profile-out", type=Path, help="keep the pstats file here")
    args = parser.parse_args(argv)
    import confluent_kafka

    share_consume.RUN_TIMEOUT_S = args.cell_timeout
    sizes = [int(x) for x in args.members.split(",")]
    partition_counts = [int(x) for x in args.partitions.split(",")]
    started = time.monotonic()
    budget_end = started + args.budget
    load_start = os.getloadavg()
    results: list[dict] = []
    notes: list[str] = []
    profile_text = ""
    with tempfile.TemporaryDirectory(prefix="bench-share-vs-kafka-") as tmp:
        work = Path(tmp)
        if args.baseline is not None:
            before = Kafkapy(work, args.baseline.resolve(), "kafkapy-before")
            try:
                before.wait_ready()
                produce_topics(before.bootstrap, partition_counts, args.records, args.size, time.monotonic() + 180)
                results += run_cells("kafkapy-before", before.bootstrap, ("share",), partition_counts, sizes,
                                     args.records, budget_end)
            finally:
                before.stop()
        kafkapy = Kafkapy(work)
        try:
            kafkapy.wait_ready()
            took = produce_topics(kafkapy.bootstrap, partition_counts, args.records, args.size,
                                  time.monotonic() + 180)
            notes.append(f"kafkapy: produced {len(partition_counts)} x {args.records} records in {took:.1f} s")
            kinds = ("share",) if args.no_classic else ("share", "classic")
            # kafkapy's share budget leaves room for Kafka's start, produce and cells
            results += run_cells("kafkapy", kafkapy.bootstrap, kinds, partition_counts, sizes, args.records,
                                 budget_end - (0 if args.no_kafka else args.budget / 2))
            if args.profile:
                p, m = (int(x) for x in args.profile_cell.split(","))
                if p in partition_counts:
                    profile_text = profile_cell(kafkapy, p, m, args.records, args.profile_out)
        finally:
            kafkapy.stop()
        if not args.no_kafka:
            try:
                with RealKafka(REFERENCES[KAFKA_REFERENCE], work / "kafka", broker_properties(),
                               authorizer=False) as kafka:
                    notes.append(f"Kafka 4.4.0 started in {kafka.started_in_s:.1f} s")
                    took = produce_topics(kafka.bootstrap, partition_counts, args.records, args.size,
                                          time.monotonic() + 180)
                    notes.append(f"Kafka: produced {len(partition_counts)} x {args.records} records in {took:.1f} s")
                    results += run_cells("kafka", kafka.bootstrap, ("share",), partition_counts, sizes,
                                         args.records, budget_end)
            except (RealKafkaUnavailable, RealKafkaStartError) as exc:
                notes.append(f"Kafka 4.4.0 not run: {exc}"[:2000])
    elapsed = time.monotonic() - started
    load_end = os.getloadavg()
    print(f"confluent-kafka {confluent_kafka.version()} (librdkafka {confluent_kafka.libversion()[0]}), every "
          f"member its own process; {args.records} records of {args.size} bytes per topic; {elapsed:.0f} s; "
          f"load average (1/5/15 min) {load_start[0]:.1f}/{load_start[1]:.1f}/{load_start[2]:.1f} at the start, "
          f"{load_end[0]:.1f}/{load_end[1]:.1f}/{load_end[2]:.1f} at the end ({os.cpu_count()} cores).")
    for note in notes:
        print(f"- {note}")
    print()
    print(render(results, sizes, partition_counts))
    if profile_text:
        print("\n" + profile_text)
    return 0 if results and all(r.get("complete") for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
