"""Child process: read one Iceberg table with Spark and write its rows as JSON.

    python -m conformance.tables.spark_reader '{"conf": {...}, "jars": [...], "table": "...", "out": "..."}'

Run by conformance.tables.readers.spark_rows with pyspark 4.0 on PYTHONPATH and TZ=UTC; bytes are
written as {"$bytes": hex}, timestamps as microseconds since the epoch.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from conformance.tables.readers import plain

JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Duser.timezone=UTC"


def to_json(value):
    if isinstance(value, bytes):
        return {"$bytes": value.hex()}
    if isinstance(value, dict):
        return {k: to_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_json(v) for v in value]
    return value


def main(request: dict) -> int:
    from pyspark.sql import SparkSession

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = (SparkSession.builder.master("local[1]").appName("kafkapy-table-reader")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.memory", "512m").config("spark.driver.extraJavaOptions", JVM_OPTIONS)
               .config("spark.sql.session.timeZone", "UTC").config("spark.sql.shuffle.partitions", "1")
               .config("spark.jars", ",".join(request["jars"])))
    for key, value in request["conf"].items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    try:
        spark.sparkContext.setLogLevel("WARN")
        rows = [to_json(plain(row)) for row in spark.table(request["table"]).collect()]
        snapshots = [{"snapshot_id": r.snapshot_id, "summary": dict(r.summary)}
                     for r in spark.sql(f"SELECT snapshot_id, summary FROM {request['table']}.snapshots "
                                        "ORDER BY committed_at").collect()]
        Path(request["out"]).write_text(json.dumps({"rows": rows, "snapshots": snapshots}))
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
