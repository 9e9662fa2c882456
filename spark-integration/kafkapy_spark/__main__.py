"""python -m kafkapy_spark: run the whole pipeline (see pipeline.py)."""

import sys

from .pipeline import main

sys.exit(main())
