"""A Spark driver in a child process: one SparkSession, operations asked for as JSON lines.

Run by kafkapy_spark.child_process.SparkChild with the python of a pyspark venv (so a test in
another environment, or another Spark version, drives Spark without importing pyspark):

    python -m kafkapy_spark.child_driver --master 'local[2]' --jars a.jar:b.jar

Each request on stdin is {"op": NAME, "args": {...}}, NAME a function of child_ops called as
NAME(spark, **args); each answer on the protocol stream (the original stdout) is {"result": ...}
or {"error": "<type>: <message>", "traceback": ...}. The first line is {"ready": <Spark version>}.
Everything else written to stdout (by the JVM or a library) goes to stderr, so it cannot break
the protocol.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import traceback
from pathlib import Path


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--jars", required=True, help="the Kafka connector's jars, joined by os.pathsep")
    parser.add_argument("--shuffle-partitions", type=int, default=2)
    parser.add_argument("--driver-memory", default="1g")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)

    from . import child_ops
    from .jars import ConnectorJars
    from .session import build_spark_session

    jars = [Path(jar) for jar in args.jars.split(os.pathsep) if jar]
    try:
        spark = build_spark_session(
            args.master, "kafkapy-spark-child", ConnectorJars(jars=jars, source="jars given to the child driver"),
            shuffle_partitions=args.shuffle_partitions, ui=False,
            extra_conf={
                "spark.driver.memory": args.driver_memory,
                "spark.kafka.producer.cache.timeout": "15s",
                "spark.kafka.producer.cache.evictorThreadRunInterval": "5s",
            },
        )
    except Exception as error:
        protocol.write(json.dumps({"error": f"{type(error).__name__}: {error}",
                                   "traceback": traceback.format_exc()}) + "\n")
        return 1
    try:
        protocol.write(json.dumps({"ready": spark.version}) + "\n")
        for line in sys.stdin:
            request = json.loads(line)
            if request["op"] == "exit":
                break
            try:
                result = getattr(child_ops, request["op"])(spark, **request.get("args", {}))
                answer = {"result": result}
            except Exception as error:  # the caller gets it as SparkChildError
                logging.getLogger("kafkapy_spark.child_driver").warning("op %s failed: %s", request["op"], error)
                answer = {"error": f"{type(error).__name__}: {error}", "traceback": traceback.format_exc()}
            protocol.write(json.dumps(answer) + "\n")
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
