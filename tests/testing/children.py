"""Stopping a child process a test started with start_new_session=True, even when the test failed."""
from __future__ import annotations

import os
import signal
import subprocess


def stop_child(proc: subprocess.Popen, timeout: float = 20.0) -> None:
    """SIGTERM its process group, SIGKILL it after `timeout` s, and close its pipes."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()
