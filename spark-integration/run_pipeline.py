#!/usr/bin/env python3
"""Run the whole Spark pipeline against kafkapy: python spark-integration/run_pipeline.py --help"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]  # kafkapy_spark, and the repo root for conformance/

from kafkapy_spark.pipeline import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
