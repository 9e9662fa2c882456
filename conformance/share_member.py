"""One share-group member for conformance/test_share_groups_concurrency.py, run as a process.

`python -m conformance.share_member BOOTSTRAP GROUP TOPIC SEED` subscribes a confluent-kafka
ShareConsumer (explicit acknowledgement), polls at random intervals, acknowledges each record
with a random type (ACCEPT, RELEASE or REJECT) and prints one JSON line per event on stdout:

  {"e": "d", "p": partition, "o": offset, "n": delivery count, "a": "ACCEPT"|"RELEASE"|"REJECT"}
  {"e": "sync"}     commit_sync() returned: every acknowledgement printed before it is applied
  {"e": "closed"}   close() returned after a final commit_sync()

A line "stop" (or end of file) on stdin makes it acknowledge what it holds, commit and close.
"""
from __future__ import annotations

import json
import random
import sys
import threading
import time

from confluent_kafka import AcknowledgeType, ShareConsumer

KINDS = (("ACCEPT", AcknowledgeType.ACCEPT, 0.75), ("RELEASE", AcknowledgeType.RELEASE, 0.15),
         ("REJECT", AcknowledgeType.REJECT, 0.10))


def _emit(event: dict) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def _pick(rng: random.Random):
    x = rng.random()
    for name, kind, weight in KINDS:
        if x < weight:
            return name, kind
        x -= weight
    return KINDS[0][0], KINDS[0][1]


def main() -> None:
    bootstrap, group, topic, seed = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    rng = random.Random(seed)
    stop = threading.Event()

    def watch_stdin() -> None:
        for line in sys.stdin:
            if line.strip() == "stop":
                break
        stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit",
                              "max.poll.records": rng.choice([2, 5, 10, 20])})
    consumer.subscribe([topic])
    try:
        while not stop.is_set():
            for message in consumer.poll(rng.uniform(0.05, 0.4)):
                if message.error():
                    continue
                name, kind = _pick(rng)
                consumer.acknowledge(message, kind)
                _emit({"e": "d", "p": message.partition(), "o": message.offset(),
                       "n": message.delivery_count(), "a": name})
            if rng.random() < 0.4:
                consumer.commit_sync()
                _emit({"e": "sync"})
            time.sleep(rng.uniform(0.0, 0.2))
        consumer.commit_sync()
        _emit({"e": "sync"})
    finally:
        consumer.close()
    _emit({"e": "closed"})


if __name__ == "__main__":
    main()
