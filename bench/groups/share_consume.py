#!/usr/bin/env python3
"""Share group (KIP-932) consume throughput against a classic consumer group, same broker, same data, same run.

One kafkapy process; two topics, with 1 and with 8 partitions, each holding the same --records
records of --size bytes. For each topic, groups of 1, 3 and 10 members read every record once:
  share    confluent-kafka ShareConsumer (implicit acknowledgement: each poll acknowledges what
           the previous one returned), group config share.auto.offset.reset=earliest;
  classic  confluent-kafka Consumer, auto.offset.reset=earliest, auto commit (librdkafka's
           default), consume(500) per call. On one partition only one classic member gets records
           (the others idle), which is the point of share groups.
Every member is its own OS process (this script with --worker) and a new group id is used for
each run. Each worker reports each batch with a CLOCK_MONOTONIC timestamp (one clock for every
process on a Linux host). Measured per run:
  first   ms from "go" (the members subscribe then) to the first record any member got: joining
          the group and the first fetch;
  all     ms from "go" to the last of the --records records;
  rate    records / s from the first record to the last (every record counted once; a share run
          may deliver some more than once, "redelivered" says how many).

    python bench/groups/share_consume.py                 # 100000 records of 100 bytes
    python bench/groups/share_consume.py --records 5000 --members 1,3 --quick
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))

RUN_TIMEOUT_S = 120.0


# -- worker (its own process) -----------------------------------------------------------------
def worker(spec: dict) -> int:
    import confluent_kafka
    conf = {"bootstrap.servers": spec["bootstrap"], "group.id": spec["group"], "client.id": spec["name"]}
    if spec["kind"] == "share":
        consumer = confluent_kafka.ShareConsumer(conf)
    else:
        consumer = confluent_kafka.Consumer({**conf, "auto.offset.reset": "earliest"})
    consumer.subscribe([spec["topic"]])
    print(json.dumps({"ready": True}), flush=True)
    stop = threading.Event()
    sys.stdin.readline()  # "go"
    threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()
    print(json.dumps({"go": time.monotonic()}), flush=True)
    try:
        while not stop.is_set():
            if spec["kind"] == "share":
                batch = consumer.poll(0.2) or []
            else:
                batch = consumer.consume(500, 0.2)
            keys = [m.offset() + (m.partition() << 40) for m in batch if m.error() is None]
            if keys:
                print(json.dumps({"n": len(keys), "t": time.monotonic(), "keys": keys}), flush=True)
    finally:
        consumer.close()
    return 0


# -- parent ---------------------------------------------------------------------------------------
def _run(bootstrap: str, kind: str, topic: str, members: int, records: int) -> dict:
    group = f"bench-{kind}-{members}-{uuid.uuid4().hex[:6]}"
    if kind == "share":
        from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for f in admin.incremental_alter_configs([ConfigResource(ResourceType.GROUP, group, incremental_configs=[
                ConfigEntry("share.auto.offset.reset", "earliest",
                            incremental_operation=AlterConfigOpType.SET)])]).values():
            f.result(15)
    procs = []
    lock = threading.Lock()
    seen: set[int] = set()
    state = {"delivered": 0, "first": None, "last": None, "go": []}
    done = threading.Event()

    def read(proc):
        for line in proc.stdout:
            msg = json.loads(line)
            with lock:
                if "go" in msg:
                    state["go"].append(msg["go"])
                elif "n" in msg:
                    state["delivered"] += msg["n"]
                    seen.update(msg["keys"])
                    state["first"] = msg["t"] if state["first"] is None else min(state["first"], msg["t"])
                    state["last"] = msg["t"] if state["last"] is None else max(state["last"], msg["t"])
                    if len(seen) >= records:
                        done.set()

    try:
        for i in range(members):
            spec = {"bootstrap": bootstrap, "group": group, "topic": topic, "kind": kind, "name": f"{group}-{i}"}
            proc = subprocess.Popen([sys.executable, __file__, "--worker", json.dumps(spec)], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                    env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
            procs.append(proc)
        for proc in procs:  # every member created and subscribed before the clock starts
            assert json.loads(proc.stdout.readline()).get("ready")
        readers = [threading.Thread(target=read, args=(p,), daemon=True) for p in procs]
        for r in readers:
            r.start()
        for proc in procs:
            proc.stdin.write("go\n")
            proc.stdin.flush()
        ok = done.wait(RUN_TIMEOUT_S)
    finally:
        for proc in procs:
            try:
                proc.stdin.write("stop\n")
                proc.stdin.flush()
            except OSError:
                pass
        for proc in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    with lock:
        go = min(state["go"]) if state["go"] else None
        span = (state["last"] - state["first"]) if state["first"] is not None else None
        return {"kind": kind, "topic": topic, "members": members, "complete": ok, "unique": len(seen),
                "redelivered": state["delivered"] - len(seen),
                "first_ms": (state["first"] - go) * 1000 if go is not None and state["first"] is not None else None,
                "rate": len(seen) / span if span else None,
                "all_ms": (state["last"] - go) * 1000 if go is not None and state["last"] is not None else None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--records", type=int, default=100000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--members", default="1,3,10", help="group sizes (default 1,3,10)")
    parser.add_argument("--partitions", default="1,8", help="partition counts of the topics (default 1,8)")
    parser.add_argument("--quick", action="store_true", help="share groups only")
    args = parser.parse_args(argv)
    if args.worker:
        return worker(json.loads(args.worker))
    import confluent_kafka
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from conformance.broker_process import start_broker

    sizes = [int(x) for x in args.members.split(",")]
    partition_counts = [int(x) for x in args.partitions.split(",")]
    overrides = {"offsets.topic.replication.factor": "1", "share.coordinator.state.topic.replication.factor": "1",
                 "share.coordinator.state.topic.num.partitions": "3", "group.initial.rebalance.delay.ms": "0"}
    started = time.monotonic()
    load_start = os.getloadavg()[0]
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-share-") as work, \
            start_broker(overrides=overrides, work_dir=Path(work) / "broker") as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
        value = b"x" * args.size
        for count in partition_counts:
            topic = f"share-bench-{count}p"
            admin.create_topics([NewTopic(topic, count, 1)])[topic].result(15)
            for i in range(args.records):
                while True:
                    try:
                        producer.produce(topic, value=value, partition=i % count)
                        break
                    except BufferError:
                        producer.poll(0.05)
            assert producer.flush(60) == 0
        for count in partition_counts:
            topic = f"share-bench-{count}p"
            for members in sizes:
                for kind in (("share",) if args.quick else ("share", "classic")):
                    result = _run(broker.bootstrap, kind, topic, members, args.records)
                    result["partitions"] = count
                    results.append(result)
                    print(json.dumps(result), file=sys.stderr, flush=True)
    elapsed = time.monotonic() - started
    print(f"confluent-kafka {confluent_kafka.version()} (librdkafka {confluent_kafka.libversion()[0]}), "
          f"every member its own process; {args.records} records of {args.size} bytes per topic; "
          f"one kafkapy process; {elapsed:.0f} s; load average {load_start:.1f} at the start, "
          f"{os.getloadavg()[0]:.1f} at the end ({os.cpu_count()} cores).\n")
    print("| partitions | members | group | first record (ms) | all records (ms) | records/s | redelivered | complete |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['partitions']} | {r['members']} | {r['kind']} | "
              f"{r['first_ms']:.0f} | {r['all_ms']:.0f} | {r['rate']:.0f} | {r['redelivered']} | "
              f"{'yes' if r['complete'] else 'no'} |"
              if r["rate"] else f"| {r['partitions']} | {r['members']} | {r['kind']} | - | - | - | - | no |")
    for count in partition_counts:
        for members in sizes:
            pair = {r["kind"]: r["rate"] for r in results if r["partitions"] == count and r["members"] == members}
            if pair.get("share") and pair.get("classic"):
                print(f"\n{count} partition(s), {members} member(s): share / classic = "
                      f"{pair['share'] / pair['classic']:.2f}", end="")
    print()
    return 0 if all(r["complete"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
