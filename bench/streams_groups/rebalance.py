"""Rebalance time of a Kafka Streams 4.4 application: group.protocol=streams against classic, kafkapy against Kafka 4.4.

    python bench/streams_groups/rebalance.py                       # kafkapy and Kafka 4.4, 3 and 10 instances
    python bench/streams_groups/rebalance.py --quick               # kafkapy, streams, 3 instances, one run
    python bench/streams_groups/rebalance.py --targets kafkapy --instances 3 --runs 5 --json out.json

Each run is one JVM (StreamsRebalanceBench.java) holding N KafkaStreams instances of the
conformance word count (exactly_once_v2, one thread each; 6 input partitions, so 12 tasks in two
subtopologies): each instance is its own group member, and JVM start-up is outside the timings.
Three phases are timed, each until every instance is RUNNING and the 12 active tasks are held once
(and stay so for a second; the second is not counted): "form" (N instances start at once), "join"
(one more starts), "leave" (one closes and leaves). Both brokers get the same group configs: Kafka's
defaults (initial rebalance delay 3 s for both protocols, the classic member's heartbeat 1 s, the
streams group's heartbeat interval 1 s). Not run in CI; conformance tests the same programs.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))

from conformance.kafka_apps.kafka_jars import KafkaDist, compile_java  # noqa: E402
from conformance.streams_groups.harness import STREAMS_BROKER_CONFIG, produce_sentences  # noqa: E402

HERE = Path(__file__).resolve().parent
TASKS = 12
PARTITIONS = 6
BROKER_CONFIG = {**STREAMS_BROKER_CONFIG, "group.initial.rebalance.delay.ms": "3000",
                 "group.streams.initial.rebalance.delay.ms": "3000"}


def run_once(bootstrap: str, protocol: str, instances: int, work: Path, timeout: float = 240.0) -> dict:
    from confluent_kafka.admin import AdminClient, NewTopic

    dist = KafkaDist.get("4.4")
    cp = dist.streams_classpath()
    classes = compile_java(str(HERE / "StreamsRebalanceBench.java"), cp)
    suffix = uuid.uuid4().hex[:8]
    app_id, source, sink = f"rebalance-{protocol}-{suffix}", f"bench-in-{suffix}", f"bench-out-{suffix}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(source, PARTITIONS, 1), NewTopic(sink, PARTITIONS, 1)]).values():
        future.result(30)
    produce_sentences(bootstrap, source, 300, seed=1)
    argv = dist.command(f"{classes}{os.pathsep}{cp}", "StreamsRebalanceBench", bootstrap, app_id, source, sink,
                        str(work / suffix), protocol, str(instances), str(TASKS), jvm=["-Xmx768m"])
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"StreamsRebalanceBench exited {proc.returncode}:\n{proc.stdout[-2000:]}\n"
                           f"{proc.stderr[-3000:]}")
    return json.loads(lines[-1])


class Target:
    """A broker to measure against: a kafkapy process or Kafka 4.4.0 from Maven."""

    def __init__(self, name: str, work: Path):
        self.name, self.work, self._broker = name, work, None

    def __enter__(self) -> str:
        if self.name == "kafkapy":
            from conformance.broker_process import start_broker

            self._broker = start_broker(overrides=BROKER_CONFIG, work_dir=self.work / "kafkapy")
        else:
            from conformance.real_kafka import REFERENCES, RealKafka

            self._broker = RealKafka(REFERENCES["kafka-4.4.0-kraft"], self.work / "kafka-4.4", BROKER_CONFIG)
            self._broker.start()
        return self._broker.bootstrap

    def __exit__(self, *exc: object) -> None:
        if self.name == "kafkapy":
            self._broker.close()
        else:
            self._broker.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--targets", default="kafkapy,kafka-4.4")
    parser.add_argument("--protocols", default="streams,classic")
    parser.add_argument("--instances", default="3,10")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="kafkapy, streams, 3 instances, one run")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if args.quick:
        args.targets, args.protocols, args.instances, args.runs = "kafkapy", "streams", "3", 1
    results: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="bench-streams-rebalance-") as tmp:
        for target in args.targets.split(","):
            with Target(target, Path(tmp)) as bootstrap:
                for n in (int(x) for x in args.instances.split(",")):
                    for protocol in args.protocols.split(","):
                        samples = []
                        for _ in range(args.runs):
                            sample = run_once(bootstrap, protocol, n, Path(tmp))
                            samples.append(sample)
                            print(f"{target} {protocol} {n}: {sample}", flush=True)
                        results.append({"target": target, "protocol": protocol, "instances": n, "samples": samples,
                                        **{k: statistics.median(s[k] for s in samples)
                                           for k in ("form_ms", "join_ms", "leave_ms")}})
    print("\n| broker | group.protocol | instances | form (N start) | join (+1) | leave (-1) | runs |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        ranges = {k: f"{min(s[k] for s in r['samples'])}-{max(s[k] for s in r['samples'])}"
                  for k in ("form_ms", "join_ms", "leave_ms")}
        print(f"| {r['target']} | {r['protocol']} | {r['instances']} | {r['form_ms']:.0f} ms ({ranges['form_ms']}) | "
              f"{r['join_ms']:.0f} ms ({ranges['join_ms']}) | {r['leave_ms']:.0f} ms ({ranges['leave_ms']}) | "
              f"{len(r['samples'])} |")
    if args.json:
        args.json.write_text(json.dumps({"time": time.time(), "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
