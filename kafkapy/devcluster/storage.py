"""Where a launched broker keeps its logs: a temporary directory on disk, or in memory.

`storage="memory"` keeps the broker's partition logs on a memory file system (tmpfs): the same
log code, segment and index files, recovery and sendfile as on disk, so the same semantics, but
nothing reaches a disk and fsync costs nothing. The data is gone when the directory is removed
(the broker stops) or the machine restarts.

The memory file system is the first of: `$KAFKAPY_MEMORY_DIR` (any writable directory you name,
for systems where none of the usual ones exist), `/dev/shm`, `$XDG_RUNTIME_DIR`, `/run/shm`, that
is a writable tmpfs or ramfs according to /proc/mounts.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["MEMORY_DIR_ENV", "STORAGES", "MemoryStorageUnavailable", "data_directory", "memory_root"]

STORAGES = ("disk", "memory")
MEMORY_DIR_ENV = "KAFKAPY_MEMORY_DIR"
_MEMORY_FILE_SYSTEMS = ("tmpfs", "ramfs")


class MemoryStorageUnavailable(RuntimeError):
    """No memory file system to keep the logs in (the message says where it looked)."""


def _mounts() -> list[tuple[str, str]]:
    """(mount point, file system type) of every mount, from /proc/mounts (empty where there is none)."""
    try:
        with open("/proc/mounts", encoding="utf-8", errors="replace") as table:
            # /proc/mounts escapes spaces in paths as \040
            return [(fields[1].replace("\\040", " "), fields[2]) for fields in map(str.split, table)
                    if len(fields) >= 3]
    except OSError:
        return []


def _on_memory_file_system(path: Path, mounts: list[tuple[str, str]]) -> bool:
    """Whether the mount `path` lies on (its longest matching mount point) is a memory file system."""
    resolved = str(path.resolve())
    best, best_type = "", ""
    for point, fs_type in mounts:
        if (resolved == point or resolved.startswith(point.rstrip("/") + "/")) and len(point) >= len(best):
            best, best_type = point, fs_type
    return best_type in _MEMORY_FILE_SYSTEMS


def memory_root() -> Path:
    """The directory on a memory file system under which memory storage makes its data dirs."""
    named = os.environ.get(MEMORY_DIR_ENV)
    if named:
        path = Path(named)
        if not (path.is_dir() and os.access(path, os.W_OK | os.X_OK)):
            raise MemoryStorageUnavailable(f"{MEMORY_DIR_ENV}={named} is not a writable directory")
        return path
    mounts = _mounts()
    candidates = ["/dev/shm", os.environ.get("XDG_RUNTIME_DIR") or "", "/run/shm"]
    for candidate in filter(None, candidates):
        path = Path(candidate)
        if path.is_dir() and os.access(path, os.W_OK | os.X_OK) and _on_memory_file_system(path, mounts):
            return path
    raise MemoryStorageUnavailable(
        "storage='memory' needs a writable memory file system (tmpfs), and none of "
        f"{', '.join(filter(None, candidates))} is one here; set {MEMORY_DIR_ENV} to such a directory, "
        "or use storage='disk'")


def data_directory(storage: str, prefix: str = "kafkapy-testing-") -> Path:
    """A new, empty temporary directory for a broker's logs on the given storage ("disk" or "memory")."""
    if storage not in STORAGES:
        raise ValueError(f"storage must be one of {', '.join(STORAGES)}, not {storage!r}")
    root = memory_root() if storage == "memory" else None
    return Path(tempfile.mkdtemp(prefix=prefix, dir=root))


if __name__ == "__main__":  # `python -m kafkapy.devcluster.storage`: print the memory root
    print(memory_root())
