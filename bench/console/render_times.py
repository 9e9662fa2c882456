#!/usr/bin/env python3
"""Server render time and wall time of each web console page, against a real kafkapy process with
the console tests' data: a topic of 1,000 partitions and a group of 100 members
(conformance/console_workload.py).

    python bench/console/render_times.py [--runs 20]

Prints, per page, the median and max of the server's own render time (the Server-Timing header)
and of the wall time seen by an HTTP client on the same machine.
"""
from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from conformance.console_workload import BIG, BIG_GROUP, ORDERS, ORDERS_APP, console_broker, load_workload  # noqa: E402

PAGES = ["/", "/topics", f"/topics/{BIG}", f"/topics/{BIG}?page=2", f"/topics/{ORDERS}",
         f"/topics/{ORDERS}/messages?partition=0&limit=50", f"/topics/{ORDERS}/messages?partition=0&q=trace-0029",
         "/groups", f"/groups/{BIG_GROUP}", f"/groups/{ORDERS_APP}", "/requests"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    broker, url = console_broker(writes=False)
    try:
        load_workload(broker.bootstrap)
        print(f"{'page':58} {'server ms (median/max)':>24} {'wall ms (median/max)':>22}")
        for path in PAGES:
            server, wall = [], []
            for _ in range(args.runs):
                started = time.perf_counter()
                with urllib.request.urlopen(url + path, timeout=10) as response:
                    response.read()
                wall.append((time.perf_counter() - started) * 1000)
                server.append(float(re.search(r"dur=([\d.]+)", response.headers["Server-Timing"]).group(1)))
            print(f"{path:58} {statistics.median(server):>13.1f} / {max(server):>7.1f} "
                  f"{statistics.median(wall):>12.1f} / {max(wall):>7.1f}")
    finally:
        broker.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
