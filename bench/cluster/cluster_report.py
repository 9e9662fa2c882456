"""Results of the cluster benchmark, and their rendering as the docs' Cluster section."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path

DOCS_HEADING = "## Cluster (bench/cluster)"
OTHER_CPU_NOTE_PCT = 20  # other processes' CPU worth showing next to a rate (of 200% on 2 cores)


@dataclass(frozen=True, slots=True)
class Layout:
    """One throughput configuration: a topic's replication factor and the producer's acks."""

    replication_factor: int
    acks: str

    @property
    def label(self) -> str:
        return f"RF{self.replication_factor}, acks={self.acks}"


# The headline ratio is LAYOUTS[-1] / LAYOUTS[0]; RF3 acks=1 sits between them (replication traffic
# on the same cores, but the producer does not wait for the followers).
LAYOUTS = (Layout(1, "1"), Layout(3, "1"), Layout(3, "all"))
BASELINE, REPLICATED = LAYOUTS[0], LAYOUTS[-1]


@dataclass
class Phase:
    """One produce or consume phase against one topic."""

    records: int = 0
    seconds: float = 0.0
    error: str | None = None
    brokers_cpu_s: float | None = None  # CPU (user + system) of all broker processes over the phase
    client_cpu_s: float | None = None  # CPU of this process (the client: Python + librdkafka threads)
    other_cpu_s: float | None = None  # CPU of everything else on the machine meanwhile (competing work)
    quiet_wait_s: float | None = None  # waited before the phase for the machine to go quiet
    wall_s: float | None = None

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0

    def cpu_pct(self, cpu_s: float | None) -> float | None:
        return None if cpu_s is None or not self.wall_s else 100 * cpu_s / self.wall_s


@dataclass
class FailoverSample:
    """One leader stopped while a paced acks=all producer writes to its partition."""

    signal: str  # "SIGKILL" or "SIGTERM"
    broker: int  # the leader that was stopped
    partition: int
    was_controller: bool
    failover_s: float | None = None  # signal sent -> first ack of a record sent after the signal
    exit_s: float | None = None  # signal sent -> process gone (controlled shutdown takes a while)
    elected_s: float | None = None  # signal sent -> the controller logs the partition's new leader
    stall_s: float | None = None  # longest time without any acknowledgement, from the signal until 1 s after exit
    new_leader: int | None = None
    acked: int = 0  # records acknowledged during the sample (before and after the stop)
    failed: int = 0  # delivery reports with an error
    last_error: str | None = None
    recovery_s: float | None = None  # restart + ISR full again (not part of the failover time)
    error: str | None = None  # the sample did not complete
    session_timeout_ms: int | None = None  # the cluster's zookeeper.session.timeout.ms


@dataclass
class Results:
    settings: dict = field(default_factory=dict)
    cluster_errors: list[str] = field(default_factory=list)
    # "produce RF3, acks=all" -> every repetition
    phases: dict[str, list[Phase]] = field(default_factory=dict)
    failover: list[FailoverSample] = field(default_factory=list)
    acked_total: int = 0  # distinct records acknowledged during the failover part
    acked_missing: int | None = None  # of those, not found when the topic was read back at the end
    read_back: int | None = None  # records read back (duplicates from retries included)
    problems: list[str] = field(default_factory=list)  # what went wrong in the run (shown in the table)
    log_alarms: list[str] = field(default_factory=list)  # broker log lines worth a look (JSON and stderr only)


def results_from_json(data: dict) -> Results:
    """The Results that bench_cluster.py wrote as JSON (to render them again)."""
    return Results(
        settings=data["settings"], cluster_errors=data["cluster_errors"],
        phases={label: [Phase(**p) for p in phases] for label, phases in data["phases"].items()},
        failover=[FailoverSample(**x) for x in data["failover"]], acked_total=data["acked_total"],
        acked_missing=data["acked_missing"], read_back=data["read_back"], problems=data["problems"],
        log_alarms=data.get("log_alarms", []))


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def median_phase(phases: list[Phase]) -> Phase | None:
    """The repetition with the median rate; a failed repetition wins so errors stay visible."""
    if not phases:
        return None
    failed = [p for p in phases if p.error]
    if failed:
        return failed[0]
    return sorted(phases, key=lambda p: p.records_per_s)[len(phases) // 2]


def _fmt_ms(seconds: float | None) -> str:
    return "—" if seconds is None else f"{seconds * 1000:,.0f} ms"


def _fmt_phase(phase: Phase | None, record_bytes: int) -> str:
    if phase is None:
        return "—"
    if phase.records == 0:
        return "error"
    mb_s = phase.records_per_s * record_bytes / 1e6
    text = f"{phase.records_per_s / 1000:.1f}k rec/s ({mb_s:.1f} MB/s)"
    brokers, client = phase.cpu_pct(phase.brokers_cpu_s), phase.cpu_pct(phase.client_cpu_s)
    other = phase.cpu_pct(phase.other_cpu_s)
    if brokers is not None and client is not None:
        text += f", CPU brokers {brokers:.0f}% + client {client:.0f}%"
        if other is not None and other >= OTHER_CPU_NOTE_PCT:
            text += f" (other processes {other:.0f}%)"
    return text + " ⚠" if phase.error else text


def failover_stats(samples: list[FailoverSample]) -> dict:
    times = [s.failover_s for s in samples if s.failover_s is not None]
    return {
        "samples": len(samples),
        "measured": len(times),
        "median_s": median(times),
        "best_s": min(times) if times else None,
        "worst_s": max(times) if times else None,
        "controller_median_s": median([s.failover_s for s in samples if s.was_controller and s.failover_s is not None]),
        "other_median_s": median([s.failover_s for s in samples if not s.was_controller and s.failover_s is not None]),
        "exit_median_s": median([s.exit_s for s in samples if s.exit_s is not None]),
        "elected_median_s": median([s.elected_s for s in samples if s.elected_s is not None]),
        "stall_median_s": median([s.stall_s for s in samples if s.stall_s is not None]),
        "stall_worst_s": max([s.stall_s for s in samples if s.stall_s is not None], default=None),
    }


def _timeout(sample: FailoverSample, settings: dict) -> int:
    return sample.session_timeout_ms or settings["session_timeout_ms"]


def _failover_rows(results: Results, settings: dict) -> list[tuple[str, int, str]]:
    """(signal, session timeout, label) for every group of failover samples, main cluster first."""
    main = settings["session_timeout_ms"]
    rows = [("SIGKILL", main, f"kill -9, session timeout {main} ms"),
            ("SIGTERM", main, "SIGTERM (controlled shutdown)")]
    others = sorted({_timeout(x, settings) for x in results.failover} - {main})
    rows += [(sig, t, f"kill -9, session timeout {t} ms" if sig == "SIGKILL" else f"SIGTERM, session timeout {t} ms")
             for t in others for sig in ("SIGKILL", "SIGTERM")]
    return rows


def _summary(results: Results) -> str:
    """One sentence per measurement with the headline numbers."""
    s = results.settings
    parts = []
    rates = {}
    for phase_name in ("produce", "consume"):
        for layout in (BASELINE, REPLICATED):
            chosen = median_phase(results.phases.get(f"{phase_name} {layout.label}", []))
            rates[phase_name, layout] = chosen.records_per_s if chosen and chosen.records else None
    if rates.get(("produce", BASELINE)) and rates.get(("produce", REPLICATED)):
        parts.append(f"producing with acks=all to replication factor 3 runs at "
                     f"{rates['produce', REPLICATED] / rates['produce', BASELINE]:.2f}x the rate of acks=1 to "
                     f"replication factor 1 (median {rates['produce', REPLICATED] / 1000:.0f}k vs "
                     f"{rates['produce', BASELINE] / 1000:.0f}k records/s)")
    if rates.get(("consume", BASELINE)) and rates.get(("consume", REPLICATED)):
        parts.append(f"consuming the RF3 topic runs at {rates['consume', REPLICATED] / rates['consume', BASELINE]:.2f}x "
                     f"the RF1 rate")
    for sig, timeout, label in _failover_rows(results, s):
        samples = [x for x in results.failover if x.signal == sig and _timeout(x, s) == timeout]
        st = failover_stats(samples)
        if st["median_s"] is None:
            continue
        what = (f"after kill -9 of a partition leader (session timeout {timeout} ms) an acks=all producer gets its "
                f"next acknowledgement after a median {st['median_s']:.1f} s (worst {st['worst_s']:.1f} s, "
                f"{st['measured']} kills)" if sig == "SIGKILL" else
                f"after SIGTERM (controlled shutdown) the longest gap between acknowledgements is a median "
                f"{st['stall_median_s'] * 1000:.0f} ms (worst {st['stall_worst_s'] * 1000:,.0f} ms, "
                f"{st['measured']} stops)" if st["stall_median_s"] is not None else "")
        if what:
            parts.append(what)
    if results.acked_missing is not None:
        parts.append(f"no acknowledged record was lost" if results.acked_missing == 0 else
                     f"**{results.acked_missing} acknowledged records were lost**")
    return "; ".join(parts) + "." if parts else ""


def render_markdown(results: Results) -> str:
    s = results.settings
    lines: list[str] = []
    lines.append(
        f"Run {s['date']} on {s['machine']}. **All three brokers, ZooKeeper and the client share these 2 cores**, "
        f"so replication's CPU cost comes straight out of the throughput. kafkapy brokers are "
        f"`python -m kafkapy serve` processes started by `kafkapy.devcluster.LocalCluster` on loopback, "
        f"disk log dirs, ZooKeeper {s.get('zookeeper', '(Debian package)')}, "
        f"`zookeeper.session.timeout.ms={s['session_timeout_ms']}` (Kafka's default is 18000); client "
        f"confluent-kafka {s['client']}.")
    lines.append("")
    for error in results.cluster_errors:
        lines.append(f"- **did not run**: {error}")
    if results.cluster_errors:
        lines.append("")

    record_bytes = s["record_bytes"]
    size = "1 KiB" if record_bytes == 1024 else f"{record_bytes} B"
    summary = _summary(results)
    if summary:
        lines.append("In short: " + summary)
        lines.append("")
    if results.phases:
        quiet = ""
        if s.get("quiet_wait_s"):
            quiet = (f"; before each phase the run waits up to {s['quiet_wait_s']:.0f} s for the machine to go "
                     f"quiet (under a quarter of a core busy), so other work on the shared cores disturbs less")
        lines.append(
            f"Throughput: one cluster of 3 brokers, {s['partitions']} partitions per topic (the controller spreads "
            f"their leaders over the 3 brokers), {size} records, the same producer and consumer code and settings "
            f"as bench/broker (linger.ms=5, no compression, no idempotence). Each phase stops at "
            f"{s['records']:,} records or {s['seconds']:.0f} s; median of {s['repeat']} repetitions, the three "
            f"layouts interleaved in each{quiet}. Consume reads the topic just produced from the beginning (leaders only; "
            f"the rate excludes the client's start-up). Ratio = RF3 acks=all / RF1 acks=1 (< 1: replication costs).")
        lines.append("")
        lines.append("| phase | " + " | ".join(layout.label for layout in LAYOUTS)
                     + f" | ratio {REPLICATED.label} / {BASELINE.label} |")
        lines.append("|---|" + "---|" * (len(LAYOUTS) + 1))
        for phase_name in ("produce", "consume"):
            chosen = {layout: median_phase(results.phases.get(f"{phase_name} {layout.label}", []))
                      for layout in LAYOUTS}
            base, repl = chosen[BASELINE], chosen[REPLICATED]
            ratio = (f"**{repl.records_per_s / base.records_per_s:.2f}**"
                     if base and repl and base.records and repl.records else "—")
            lines.append(f"| {phase_name} {s['partitions']} part, {size} | "
                         + " | ".join(_fmt_phase(chosen[layout], record_bytes) for layout in LAYOUTS)
                         + f" | {ratio} |")
        lines.append("")
        spread = []
        for label, phases in results.phases.items():
            rates = [p.records_per_s for p in phases]
            spread.append(f"{label}: " + ", ".join(f"{rate / 1000:.1f}k" for rate in rates))
        lines.append("Every repetition (rec/s): " + "; ".join(spread) + ".")
        lines.append("")
        for phase_name in ("produce", "consume"):
            pairs = zip(results.phases.get(f"{phase_name} {REPLICATED.label}", []),
                        results.phases.get(f"{phase_name} {BASELINE.label}", []))
            ratios = [a.records_per_s / b.records_per_s for a, b in pairs if a.records and b.records]
            if len(ratios) > 1:
                lines.append(f"{phase_name.capitalize()} ratio within each repetition: "
                             + ", ".join(f"{r:.2f}" for r in ratios) + f" (median {median(ratios):.2f}).")
        lines.append("")

    if results.failover or s.get("kills"):
        lines.append(
            f"Failover: a second 3-broker cluster, topic with {s['partitions']} partitions, replication factor 3 "
            f"(min.insync.replicas=1). Before each sample the preferred leaders are restored (ElectLeaders) and the "
            f"ISR is full; a confluent-kafka producer with acks=all (linger.ms=0, no idempotence, "
            f"message.timeout.ms=120000) sends one record every {s['interval_ms']:g} ms to the partition led by the "
            f"broker to be stopped; then that broker gets the signal. **Failover time = from the signal to the first "
            f"acknowledgement of a record sent after the signal.** \"Longest ack gap\" is the longest time without "
            f"any acknowledgement from the signal until 1 s after the old leader's process is gone: with SIGTERM the "
            f"old leader keeps answering until the controller has moved the partition, so the first acknowledgement "
            f"can come before the move and the gap shows the disruption. The stopped broker is started again and the ISR "
            f"waited for before the next sample; the stopped broker rotates 1, 2, 3, 1, …" + (
                f" A third cluster with zookeeper.session.timeout.ms={s['compare_session_timeout_ms']} (Kafka's "
                f"default) gives {s['compare_kills']} kill -9 samples for comparison." if s.get("compare_kills") else ""))
        lines.append("")
        lines.append("| leader stopped by | samples | failover median | best | worst | median when it was the "
                     "controller | median otherwise | longest ack gap, median / worst | signal → new leader in the "
                     "controller's log (median) | signal → process gone (median) |")
        lines.append("|---|---|---|---|---|---|---|---|---|---|")
        for sig, timeout, label in _failover_rows(results, s):
            samples = [x for x in results.failover if x.signal == sig and _timeout(x, s) == timeout]
            if not samples:
                continue
            st = failover_stats(samples)
            count = f"{st['measured']}" + (f" of {st['samples']}" if st["measured"] != st["samples"] else "")
            lines.append(f"| {label} | {count} | **{_fmt_ms(st['median_s'])}** | {_fmt_ms(st['best_s'])} | "
                         f"{_fmt_ms(st['worst_s'])} | {_fmt_ms(st['controller_median_s'])} | "
                         f"{_fmt_ms(st['other_median_s'])} | {_fmt_ms(st['stall_median_s'])} / "
                         f"{_fmt_ms(st['stall_worst_s'])} | {_fmt_ms(st['elected_median_s'])} | "
                         f"{_fmt_ms(st['exit_median_s'])} |")
        lines.append("")
        for sig, timeout, label in _failover_rows(results, s):
            samples = [x for x in results.failover if x.signal == sig and _timeout(x, s) == timeout]
            if samples:
                cells = []
                for x in samples:
                    mark = "*" if x.was_controller else ""
                    cells.append(f"b{x.broker}{mark} {_fmt_ms(x.failover_s) if x.failover_s is not None else 'none'}")
                lines.append(f"All samples, {label} (broker stopped, * = it was the controller): "
                             + ", ".join(cells) + ".")
                lines.append("")
        if results.acked_missing is not None:
            lines.append(f"Acknowledged records lost over all stops: **{results.acked_missing} of "
                         f"{results.acked_total:,}** (the topic read back at the end holds {results.read_back:,} "
                         f"records, retried duplicates included).")
            lines.append("")
        failed = [x for x in results.failover if x.error]
        if failed:
            lines.append("⚠ samples with a problem (a failover time measured before the problem still counts):")
            lines.extend(f"- {x.signal} broker {x.broker}: {x.error}" for x in failed)
            lines.append("")
    problems = list(results.problems)
    for label, phases in results.phases.items():
        for p in phases:
            if p.error:
                problems.append(f"{label}: {p.error}")
    if problems:
        lines.append("⚠ problems seen during the run:")
        lines.extend(f"- {p}" for p in problems)
        lines.append("")

    lines.append(
        "Reading the tables: with replication factor 3 every record is written three times on the same disk and "
        "followers fetch it over loopback, all on the 2 cores the brokers and the client share; \"CPU\" is the sum "
        "over the three broker processes (and separately this client process) as a share of one core, so "
        "200% is the whole machine; \"other processes\" is what the rest of the machine used meanwhile (shown from "
        f"{OTHER_CPU_NOTE_PCT}%: the run competed for the cores). RF3 acks=1 shows the cost of the replication traffic alone; RF3 acks=all adds "
        "the wait for the followers (the high watermark) before each acknowledgement. On a real cluster each "
        "broker has its own cores and disk (and a real network between them), so the ratio here mostly shows the "
        "extra work replication costs on one small machine, not what separate machines would see. Consume rates of RF1 and RF3 "
        "should match: consumers read from leaders only. Failover with kill -9 is dominated by the ZooKeeper "
        f"session timeout ({s['session_timeout_ms']} ms): the controller only learns that the leader is gone when "
        "its ephemeral /brokers/ids znode expires. ZooKeeper counts the timeout from the broker's last heartbeat and "
        "expires sessions on its tick (tickTime=2000 ms here), so the expiry lands between a bit under the "
        "timeout and 2 s over it. What "
        "follows the expiry is the controller's election (the \"new leader in the controller's log\" column; when "
        "the killed leader was also the controller, a new controller is elected first) and the client finding the "
        "new leader (librdkafka refreshes its metadata after the connection to the old leader fails; the difference "
        "between the failover and election columns, about a second here). SIGTERM goes "
        "through controlled shutdown: the controller moves leadership away before the broker exits, so there is no "
        "session to wait for.")
    lines.append("")
    lines.append(f"Reproduce: `python bench/cluster/bench_cluster.py{s['args']}` (about {s['duration_s'] / 60:.0f} min; "
                 f"raw results in build/bench/cluster.json; `--quick` is a smoke run of under 2 minutes)")
    return "\n".join(lines)


def write_docs(markdown: str, docs_path: Path) -> None:
    """Replace the body of the Cluster section of docs/benchmarks.md, leaving other sections alone."""
    text = docs_path.read_text()  # re-read right before editing: other sections change concurrently
    start = text.find(DOCS_HEADING)
    if start < 0:
        text = text.rstrip("\n") + f"\n\n{DOCS_HEADING}\n\n{markdown}\n"
    else:
        body_start = start + len(DOCS_HEADING)
        next_heading = text.find("\n## ", body_start)
        tail = text[next_heading:] if next_heading >= 0 else ""
        text = text[:body_start] + "\n\n" + markdown.rstrip("\n") + "\n" + tail
    docs_path.write_text(text)
