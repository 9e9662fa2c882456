#!/usr/bin/env python3
"""`python -m kafkapy serve` under cProfile, switched on and off by signals (for bench/broker/consume_cpu.py).

    PYTHONPATH=<tree> python bench/broker/profiled_serve.py OUT.prof serve --override ...

SIGUSR1 starts a fresh profile of the broker's main thread (its event loop: every handler runs there);
SIGUSR2 stops it and writes it to OUT.prof (pstats format; `python -m pstats OUT.prof`). So one phase
of a benchmark, e.g. the consume phase alone, is profiled, not the start-up or the produce before it.
The kafkapy imported is the one PYTHONPATH names (this file does not import it from its own checkout).
"""

from __future__ import annotations

import cProfile
import os
import runpy
import signal
import sys


def main() -> None:
    out = sys.argv[1]
    state: dict[str, cProfile.Profile | None] = {"profile": None}

    def start(_signum, _frame) -> None:
        if state["profile"] is None:
            state["profile"] = cProfile.Profile()
            state["profile"].enable()

    def stop(_signum, _frame) -> None:
        profile, state["profile"] = state["profile"], None
        if profile is not None:
            profile.disable()
            profile.dump_stats(out)

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    sys.argv = ["kafkapy", *sys.argv[2:]]
    here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0]) == here:
        del sys.path[0]  # this script's directory: kafkapy must come from PYTHONPATH
    runpy.run_module("kafkapy", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
