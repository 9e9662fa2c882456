"""ProducerIdAllocator: ids are unique across reopen and SIGKILL, the block end is persisted first."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from kafkapy.log.producer_ids import ProducerIdAllocator, ProducerIdStoreError

REPO = Path(__file__).resolve().parents[2]


def test_fresh_allocator_starts_at_zero_and_is_sequential(tmp_path):
    alloc = ProducerIdAllocator(tmp_path / "producer_ids", block_size=4)
    assert [alloc.allocate() for _ in range(10)] == list(range(10))
    assert alloc.block_end == 12


def test_block_end_is_persisted_before_ids_are_handed_out(tmp_path):
    path = tmp_path / "producer_ids"
    alloc = ProducerIdAllocator(path, block_size=1000)
    assert not path.exists()
    assert alloc.allocate() == 0
    assert json.loads(path.read_text()) == {"version": 1, "block_end": 1000}
    for _ in range(999):
        alloc.allocate()
    assert json.loads(path.read_text())["block_end"] == 1000
    assert alloc.allocate() == 1000
    assert json.loads(path.read_text())["block_end"] == 2000
    assert not list(tmp_path.glob("*.tmp"))


def test_reopen_never_repeats_ids(tmp_path):
    path = tmp_path / "producer_ids"
    seen: set[int] = set()
    last = -1
    for _ in range(5):
        alloc = ProducerIdAllocator(path, block_size=7)
        for _ in range(3):
            pid = alloc.allocate()
            assert pid not in seen and pid > last
            seen.add(pid)
            last = pid
    # each reopen skips the unused rest of the previous block
    assert sorted(seen) == [0, 1, 2, 7, 8, 9, 14, 15, 16, 21, 22, 23, 28, 29, 30]


def test_reopen_without_allocating_keeps_the_bound(tmp_path):
    path = tmp_path / "producer_ids"
    ProducerIdAllocator(path, block_size=5).allocate()
    ProducerIdAllocator(path, block_size=5)  # opened, nothing handed out
    assert ProducerIdAllocator(path, block_size=5).allocate() == 5


def test_concurrent_allocation_is_unique(tmp_path):
    alloc = ProducerIdAllocator(tmp_path / "producer_ids", block_size=50)
    results: list[list[int]] = [[] for _ in range(4)]

    def work(out: list[int]) -> None:
        for _ in range(300):
            out.append(alloc.allocate())

    threads = [threading.Thread(target=work, args=(r,)) for r in results]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    ids = [pid for r in results for pid in r]
    assert len(ids) == len(set(ids)) == 1200


@pytest.mark.parametrize("content", ["", "{", "[]", '{"version": 1}', '{"version": 2, "block_end": 5}',
                                     '{"version": 1, "block_end": -3}', '{"version": 1, "block_end": "7"}'])
def test_unreadable_file_is_an_error_not_a_restart_at_zero(tmp_path, content):
    path = tmp_path / "producer_ids"
    path.write_text(content)
    with pytest.raises(ProducerIdStoreError):
        ProducerIdAllocator(path)


def test_leftover_temp_file_is_ignored(tmp_path):
    path = tmp_path / "producer_ids"
    ProducerIdAllocator(path, block_size=10).allocate()
    (tmp_path / "producer_ids.tmp").write_text("garbage from a crash mid-write")
    alloc = ProducerIdAllocator(path, block_size=10)
    assert alloc.allocate() == 10
    assert json.loads(path.read_text())["block_end"] == 20


def test_exhaustion(tmp_path):
    path = tmp_path / "producer_ids"
    path.write_text(json.dumps({"version": 1, "block_end": 2**63 - 5}))
    alloc = ProducerIdAllocator(path, block_size=10)
    with pytest.raises(ProducerIdStoreError):
        alloc.allocate()


def test_ids_never_repeat_after_sigkill(tmp_path):
    path = tmp_path / "producer_ids"
    script = (
        "import sys\n"
        "from kafkapy.log.producer_ids import ProducerIdAllocator\n"
        f"alloc = ProducerIdAllocator({str(path)!r}, block_size=10)\n"
        "while True:\n"
        "    print(alloc.allocate(), flush=True)\n"
    )
    seen: set[int] = set()
    for _ in range(3):
        proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                                cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
        try:
            got = [int(proc.stdout.readline()) for _ in range(25)]
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
            proc.stdout.close()
        assert not seen & set(got)
        seen.update(got)
        # whatever the killed process handed out is below the persisted bound
        assert max(seen) < ProducerIdAllocator(path, block_size=10).block_end
    alloc = ProducerIdAllocator(path, block_size=10)
    assert alloc.allocate() > max(seen)
