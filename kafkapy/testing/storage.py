"""Where a test broker keeps its logs (storage="disk" or "memory"): kafkapy.devcluster.storage, which
the broker launcher uses, under the name that docs/testing.md and `kafkapy serve --ephemeral` know."""
from __future__ import annotations

from ..devcluster.storage import (MEMORY_DIR_ENV, STORAGES, MemoryStorageUnavailable, _mounts,  # noqa: F401
                                  _on_memory_file_system, data_directory, memory_root)

__all__ = ["MEMORY_DIR_ENV", "STORAGES", "MemoryStorageUnavailable", "data_directory", "memory_root"]

if __name__ == "__main__":  # `python -m kafkapy.testing.storage`: print the memory root (scripts/test.sh)
    print(memory_root())
