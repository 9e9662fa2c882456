"""Wall-clock jumps of one process (kafkapy.devcluster.clock): time.time() and datetime follow the
offset file, time.monotonic() and time.sleep() do not. Needs a C compiler: skipped loudly without."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from kafkapy.devcluster.clock import ClockShift

AVAILABLE, WHY_NOT = ClockShift.available()
pytestmark = [pytest.mark.timeout(60),
              pytest.mark.skipif(not AVAILABLE, reason=f"!!! wall-clock jumps cannot be made here: {WHY_NOT}")]

# Prints, once a line arrives on stdin, wall-clock minus our clock and the monotonic clock; a sleep
# in between must work (libfaketime's wrapper fails it).
CHILD = ("import sys, time, datetime\n"
         "for line in sys.stdin:\n"
         "    time.sleep(0.01)\n"
         "    print(time.time() - float(line), datetime.datetime.now().timestamp() - float(line), "
         "time.monotonic(), flush=True)\n")


def test_the_wall_clock_jumps_and_comes_back(tmp_path):
    shift = ClockShift(tmp_path / "child.clock")
    child = subprocess.Popen([sys.executable, "-c", CHILD], env={**os.environ, **shift.env()}, text=True,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        def ask() -> tuple[float, float, float]:
            child.stdin.write(f"{time.time()}\n")
            child.stdin.flush()
            wall, dt, mono = map(float, child.stdout.readline().split())
            return wall, dt, mono

        wall, dt, mono_before = ask()
        assert abs(wall) < 5 and abs(dt) < 5
        shift.set(3600)
        time.sleep(0.3)  # the wrapper looks at the file every 100 ms
        wall, dt, mono = ask()
        assert 3595 < wall < 3605 and 3595 < dt < 3605
        assert 0 < mono - mono_before < 60  # the monotonic clock did not jump
        shift.set(-120)
        time.sleep(0.3)
        wall, dt, _ = ask()
        assert -125 < wall < -115
        shift.set(0)
        time.sleep(0.3)
        assert abs(ask()[0]) < 5
    finally:
        child.kill()
        child.wait(5)
