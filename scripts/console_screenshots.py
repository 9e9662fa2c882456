#!/usr/bin/env python3
"""Take the web console's screenshots for docs/console.md: runs the browser tests
(conformance/test_console_browser.py) with KAFKAPY_CONSOLE_SCREENSHOTS set, so each page is saved
as a PNG while the tests click through it.

    python scripts/console_screenshots.py [--out docs/console]

The broker samples its history every 0.25 s here (KAFKAPY_CONSOLE_SAMPLE_INTERVAL_S), so the
plots, which show the last 360 samples, cover the test's own traffic instead of an hour.
Needs what the browser tests need: chromium, chromium-driver and selenium.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(REPO / "docs" / "console"), help="directory for the PNGs")
    parser.add_argument("--sample-interval", default="0.25", help="seconds between history samples")
    args = parser.parse_args()
    env = dict(os.environ, KAFKAPY_CONSOLE_SCREENSHOTS=str(Path(args.out).resolve()),
               KAFKAPY_CONSOLE_SAMPLE_INTERVAL_S=args.sample_interval)
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:warnings",
                             "conformance/test_console_browser.py"], cwd=REPO, env=env)
    if result.returncode == 0:
        for png in sorted(Path(args.out).glob("*.png")):
            print(f"{png.relative_to(REPO) if png.is_relative_to(REPO) else png}: {png.stat().st_size // 1024} KiB")
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
