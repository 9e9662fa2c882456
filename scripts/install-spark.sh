#!/usr/bin/env bash
# Installs the Spark runtimes of the Spark tests (spark-integration/): pyspark 4.0.0 and 3.5.7, each
# in its own venv under ~/.cache/kafkapy/venvs/ (from PyPI), and Spark's Kafka connector jars of each
# version from Maven Central (conformance/maven.py, cached in ~/.m2). Idempotent: quick when both are
# there. The Spark tests call the same code on first use; running this first only moves the download.
#
#   bash scripts/install-spark.sh          # both
#   bash scripts/install-spark.sh 3.5      # one
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-$(command -v python3 || command -v python)}"
PYTHONPATH="$PWD/spark-integration:$PWD${PYTHONPATH:+:$PYTHONPATH}" exec "$PYTHON" -m kafkapy_spark.runtimes install "$@"
