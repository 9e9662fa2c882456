"""Wall-clock jumps for one broker process, for fault tests: its CLOCK_REALTIME moves, nothing else's.

A small LD_PRELOAD library, compiled here on first use with the system's C compiler, wraps
clock_gettime (the CLOCK_REALTIME family), gettimeofday and time: each adds an offset in
seconds read from a file named by $KAFKAPY_CLOCK_OFFSET_FILE (re-read at most every 100 ms, so a
jump reaches the running process within that). CLOCK_MONOTONIC and CLOCK_BOOTTIME are left
alone, as on a real machine whose clock NTP steps: Python's time.time() and datetime.now() jump,
time.monotonic(), time.sleep() and asyncio's timers do not.

    shift = ClockShift(work_dir / "broker-2.clock")     # offset 0 until set
    env = {**os.environ, **shift.env()}                 # the broker's environment
    shift.set(3600)                                     # its wall clock jumps 1 h forward
    shift.set(0)                                        # and back

Why not libfaketime (Debian's `faketime`): with FAKETIME_DONT_FAKE_MONOTONIC=1 (wall clock only)
its clock_nanosleep wrapper answers EINVAL to the absolute CLOCK_MONOTONIC sleeps that Python's
time.sleep() makes (libfaketime 0.9.10), so no Python program can run under it that way; without
that setting the monotonic clock jumps too, which no real clock step does.

Needs a C compiler (`cc`, Debian's gcc) and a glibc system; `ClockShift.available()` says why not.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

__all__ = ["OFFSET_FILE_ENV", "ClockShift", "ClockShiftUnavailable"]

OFFSET_FILE_ENV = "KAFKAPY_CLOCK_OFFSET_FILE"

# Our own wrapper: the offset file holds a decimal number of seconds (e.g. "3600", "-1.5").
_SOURCE = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);
static clock_gettime_fn real_clock_gettime;
static volatile long long offset_ns;      /* the current offset */
static volatile long long next_read_ns;   /* monotonic time of the next look at the file */

static void load_real(void) {
    if (!real_clock_gettime)
        real_clock_gettime = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
}

/* Re-read the offset file at most every 100 ms (of the monotonic clock). A missing or empty
   file keeps the last offset; races between threads only ever read the file twice. */
static long long current_offset(void) {
    struct timespec now;
    load_real();
    if (real_clock_gettime(CLOCK_MONOTONIC, &now) != 0)
        return offset_ns;
    long long mono = (long long)now.tv_sec * 1000000000LL + now.tv_nsec;
    if (mono < next_read_ns)
        return offset_ns;
    next_read_ns = mono + 100000000LL;
    const char *path = getenv("KAFKAPY_CLOCK_OFFSET_FILE");
    if (!path)
        return offset_ns;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return offset_ns;
    char text[64];
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0)
        return offset_ns;
    text[n] = 0;
    char *end;
    double seconds = strtod(text, &end);
    if (end != text)
        offset_ns = (long long)(seconds * 1e9);
    return offset_ns;
}

static void shift(struct timespec *ts) {
    long long t = (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec + current_offset();
    ts->tv_sec = t / 1000000000LL;
    ts->tv_nsec = t % 1000000000LL;
    if (ts->tv_nsec < 0) { ts->tv_nsec += 1000000000LL; ts->tv_sec -= 1; }
}

int clock_gettime(clockid_t clock, struct timespec *ts) {
    load_real();
    int rc = real_clock_gettime(clock, ts);
    if (rc == 0 && (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE))
        shift(ts);
    return rc;
}

int gettimeofday(struct timeval *tv, void *tz) {
    struct timespec ts;
    (void)tz;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
        return -1;
    if (tv) { tv->tv_sec = ts.tv_sec; tv->tv_usec = ts.tv_nsec / 1000; }
    return 0;
}

time_t time(time_t *out) {
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
        return (time_t)-1;
    if (out)
        *out = ts.tv_sec;
    return ts.tv_sec;
}
"""


class ClockShiftUnavailable(RuntimeError):
    """The wrapper library cannot be built here (the message says why)."""


def _library_dir() -> Path:
    return Path(tempfile.gettempdir()) / f"kafkapy-clock-{os.getuid()}"


def build_library() -> Path:
    """The compiled wrapper (built once per source version into a per-user temporary directory)."""
    digest = hashlib.sha256(_SOURCE.encode()).hexdigest()[:12]
    target = _library_dir() / f"clockshift-{digest}.so"
    if target.exists():
        return target
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise ClockShiftUnavailable("no C compiler (cc) to build the clock wrapper (apt-get install gcc)")
    target.parent.mkdir(mode=0o700, exist_ok=True)
    source = target.with_suffix(".c")
    source.write_text(_SOURCE)
    partial = target.with_name(f"{target.name}.{os.getpid()}")
    done = subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-o", str(partial), str(source), "-ldl"],
                          capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        raise ClockShiftUnavailable(f"building the clock wrapper failed: {done.stderr.strip()[:500]}")
    partial.replace(target)  # atomic: a concurrent build loses nothing
    return target


class ClockShift:
    """The offset of one process's wall clock, in a file the wrapper library reads (module docstring)."""

    def __init__(self, offset_file: str | os.PathLike) -> None:
        self.offset_file = Path(offset_file)
        self.offset_s = 0.0

    @staticmethod
    def available() -> tuple[bool, str]:
        """(True, "") when the wrapper can be built and loaded here, else (False, why not)."""
        try:
            library = build_library()
        except (ClockShiftUnavailable, OSError, subprocess.SubprocessError) as exc:
            return False, str(exc)
        probe = subprocess.run(["sh", "-c", "true"], env={**os.environ, "LD_PRELOAD": str(library)},
                               capture_output=True, text=True, timeout=30, check=False)
        if probe.returncode != 0 or "cannot be preloaded" in probe.stderr:
            return False, f"the clock wrapper cannot be preloaded: {probe.stderr.strip()[:300]}"
        return True, ""

    def env(self) -> dict[str, str]:
        """What the process's environment needs (on top of the usual one)."""
        self.set(self.offset_s)  # the file exists before the process starts
        library = str(build_library())
        preload = os.environ.get("LD_PRELOAD")
        return {"LD_PRELOAD": f"{library} {preload}" if preload else library,
                OFFSET_FILE_ENV: str(self.offset_file.resolve())}

    def set(self, offset_s: float) -> None:
        """Move the process's wall clock to real time + `offset_s` (within 100 ms)."""
        self.offset_s = float(offset_s)
        partial = self.offset_file.with_name(f"{self.offset_file.name}.new")
        partial.write_text(f"{self.offset_s!r}\n")
        partial.replace(self.offset_file)  # never a half-written number
