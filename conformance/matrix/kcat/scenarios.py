"""The client matrix's kcat program: Debian's kcat (librdkafka of the distribution) runs the
metadata, produce and consume scenarios of the contract; the others are `unsupported`.

    python scenarios.py BOOTSTRAP PREFIX

kcat cannot create topics: the 1-partition topics a produce scenario writes to are created with
kafka-python's admin client (set-up, not the subject). Values are text (kcat -P splits its input
on newlines), keys split off with -K; offsets are those the consumer reads back (kcat -P prints none).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
RECORD_COUNT = 100
TIMEOUT_S = 20.0
UNSUPPORTED = {
    "create_delete_topic": "kcat has no topic admin",
    "group_consume_commit": "the kcat cell runs metadata/produce/consume scenarios only",
    "transactions": "the kcat cell runs metadata/produce/consume scenarios only",
    "admin_describe_configs": "kcat has no config admin",
    "error_fenced_producer": "the kcat cell runs metadata/produce/consume scenarios only",
    "error_not_authorized": "the kcat cell runs metadata/produce/consume scenarios only",
}


def record(i: int) -> tuple[str, str]:
    return f"key-{i}", f"value-{i}-" + bytes(range(256)).hex()


def kcat(bootstrap: str, *args: str, stdin: str | None = None) -> str:
    result = subprocess.run([shutil.which("kcat") or "kcat", "-b", bootstrap, *args], input=stdin,
                            capture_output=True, text=True, timeout=TIMEOUT_S)
    if result.returncode != 0:
        raise RuntimeError(f"kcat {' '.join(args)} exited {result.returncode}: {result.stderr.strip()[-500:]}")
    return result.stdout


def setup_topic(bootstrap: str, topic: str) -> None:
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        admin.create_topics({topic: {"num_partitions": 1, "replication_factor": 1}}, wait_for_metadata=True)
    finally:
        admin.close()


def metadata(bootstrap: str, prefix: str) -> dict:
    md = json.loads(kcat(bootstrap, "-L", "-J"))
    return {"brokers": len(md["brokers"]), "controller": md.get("controllerid", -1) >= 0,
            "topics_listed": isinstance(md["topics"], list)}


def produce(bootstrap: str, prefix: str, codec: str) -> dict:
    topic = f"{prefix}-produce-{codec}"
    setup_topic(bootstrap, topic)
    lines = "".join("\t".join(record(i)) + "\n" for i in range(RECORD_COUNT))
    kcat(bootstrap, "-P", "-t", topic, "-p", "0", "-K", "\t", "-z", codec, "-X", "acks=all",
         "-X", "enable.idempotence=true", stdin=lines)
    out = kcat(bootstrap, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-J", "-q")
    read = [json.loads(line) for line in out.splitlines() if line.strip()]
    offsets = [r["offset"] for r in read]
    return {"first_offset": offsets[0] if offsets else None, "last_offset": offsets[-1] if offsets else None,
            "read": len(read), "round_trip": [(r["key"], r["payload"]) for r in read] == [record(i) for i in range(len(read))],
            "idempotent": True}


def error_unknown_topic(bootstrap: str, prefix: str) -> dict:
    md = json.loads(kcat(bootstrap, "-L", "-J", "-t", f"{prefix}-missing"))
    return {"describe_error": md["topics"][0].get("error", "none")}


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    _, bootstrap, prefix = argv
    order = ["metadata", "create_delete_topic", *(f"produce_{c}" for c in CODECS), "group_consume_commit",
             "transactions", "admin_describe_configs", "error_unknown_topic", "error_fenced_producer",
             "error_not_authorized"]
    for name in order:
        line = {"scenario": name, "status": "pass", "observed": {}, "detail": ""}
        try:
            if name in UNSUPPORTED:
                line.update(status="unsupported", detail=UNSUPPORTED[name])
            elif name.startswith("produce_"):
                line["observed"] = produce(bootstrap, prefix, name.removeprefix("produce_"))
            else:
                line["observed"] = globals()[name](bootstrap, prefix)
        except Exception as exc:  # noqa: BLE001 - every failure is a result line
            print(f"scenario {name} failed: {exc!r}", file=sys.stderr)
            line.update(status="fail", detail=f"{type(exc).__name__}: {exc}")
        sys.stdout.write(json.dumps(line, sort_keys=True) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
