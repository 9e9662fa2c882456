#!/usr/bin/env python3
"""Small transactions: how many a librdkafka producer commits per second, one after the other, on
a single kafkapy broker and on a ZooKeeper-mode cluster of 3 (RF3, min.insync.replicas=2), in the
same run.

Each transaction is 10 records of 100 bytes over 3 partitions, then commit_transaction; the
producer starts the next one at once. In a cluster every step is replicated: the Prepare record
(EndTxn is answered once it is on the ISR), the markers (written only after that, each answered
once on its ISR) and the Complete record; the next transaction's AddPartitionsToTxn meets
CONCURRENT_TRANSACTIONS until the previous one completed, and the client retries. Reported:
transactions/s per setup and the ratio cluster / single node.

    python bench/cluster/transactions.py [--transactions N] [--repeat R]

Everything listens on loopback only and every process is stopped on the way out.
"""
from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))

import confluent_kafka  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from kafkapy.devcluster.brokers import LocalCluster  # noqa: E402

PARTITIONS = 3
RECORDS_PER_TXN = 10


def rate(bootstrap: str, replication: int, transactions: int, repeat: int) -> list[float]:
    """Transactions per second, one sample per repetition (after 20 unmeasured)."""
    topic = f"txn-bench-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the topic exists
    admin.create_topics([NewTopic(topic, PARTITIONS, replication)])[topic].result(60)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap,
                                         "transactional.id": f"txn-bench-{uuid.uuid4().hex[:8]}"})
    producer.init_transactions(60)

    def one() -> None:
        producer.begin_transaction()
        for i in range(RECORDS_PER_TXN):
            producer.produce(topic, value=b"x" * 100, partition=i % PARTITIONS)
        producer.commit_transaction(60)

    for _ in range(20):
        one()
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        for _ in range(transactions):
            one()
        samples.append(transactions / (time.perf_counter() - started))
    return samples


def single_node(args: argparse.Namespace) -> list[float]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with tempfile.TemporaryDirectory(prefix="kafkapy-txn-bench-") as data:
        broker = subprocess.Popen([sys.executable, "-m", "kafkapy", "serve", "--override",
                                   f"listeners=PLAINTEXT://127.0.0.1:{port}", "--override", f"log.dirs={data}"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), 0.5).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise RuntimeError("the single broker did not start") from None
                    time.sleep(0.1)
            return rate(f"127.0.0.1:{port}", 1, args.transactions, args.repeat)
        finally:
            broker.terminate()
            try:
                broker.wait(30)
            except subprocess.TimeoutExpired:
                broker.kill()


def cluster(args: argparse.Namespace) -> list[float]:
    with tempfile.TemporaryDirectory(prefix="kafkapy-txn-bench-cluster-") as work:
        overrides = {"min.insync.replicas": 2, "offsets.topic.num.partitions": 3,
                     "transaction.state.log.num.partitions": 3}
        with LocalCluster(Path(work), brokers=3, overrides=overrides, await_registration=True) as nodes:
            return rate(nodes.bootstrap, 3, args.transactions, args.repeat)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transactions", type=int, default=300, help="per repetition (default 300)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    single, replicated = single_node(args), cluster(args)
    print("| setup | transactions/s (median of %d x %d) | all samples |" % (args.repeat, args.transactions))
    print("|---|---|---|")
    for label, samples in (("single broker", single), ("3 brokers, RF3, min ISR 2", replicated)):
        print(f"| {label} | {statistics.median(samples):.1f} | {', '.join(f'{s:.1f}' for s in samples)} |")
    print(f"\nratio cluster / single node: {statistics.median(replicated) / statistics.median(single):.2f}")


if __name__ == "__main__":
    main()
