"""Leftover children: broker processes the launcher started and did not stop are SIGKILLed when
this interpreter exits, or when it gets SIGTERM (chain_sigterm), so an aborted test run leaves no
broker behind.
"""
from __future__ import annotations

import atexit
import os
import signal
import threading
from collections.abc import Callable

# Child processes started and not yet stopped; whatever is in here when the interpreter ends is killed.
_live: set = set()  # BrokerLaunchers (launcher.py)
_sigterm_installed = False


@atexit.register
def kill_leftovers() -> None:
    """SIGKILL every broker process this interpreter started and did not stop."""
    for launcher in list(_live):
        if launcher.proc is not None:
            try:
                os.killpg(launcher.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    _live.clear()


def chain_sigterm(cleanup: Callable[[], None]) -> bool:
    """Run `cleanup` on SIGTERM too (e.g. a CI timeout), which skips atexit by default; False when
    that cannot be done here (not the main thread, where Python alone sets signal handlers, or
    SIGTERM ignored).

    Children run in their own sessions, so a signal to our process group misses them. The handler
    then passes the signal on to whatever handled it before (another cleanup, or the default
    action), so it composes with other cleanups in either order."""
    if threading.current_thread() is not threading.main_thread():
        return False
    previous = signal.getsignal(signal.SIGTERM)
    if previous is signal.SIG_IGN:
        return False

    def on_sigterm(signum: int, frame: object) -> None:
        cleanup()
        if callable(previous):
            previous(signum, frame)
            return
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_sigterm)
    return True


def stop_children_on_sigterm() -> None:
    """Kill the launchers' leftover children on SIGTERM too (once)."""
    global _sigterm_installed
    if not _sigterm_installed:
        _sigterm_installed = chain_sigterm(kill_leftovers)


def suspend_sigterm_cleanup() -> Callable[[], None]:
    """Keep stop_children_on_sigterm from taking SIGTERM over (a program that handles SIGTERM itself
    and stops its brokers in order, as `kafkapy cluster` does); returns the function that undoes it."""
    global _sigterm_installed
    was_installed, _sigterm_installed = _sigterm_installed, True

    def restore() -> None:
        global _sigterm_installed
        _sigterm_installed = was_installed

    return restore
