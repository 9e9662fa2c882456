"""kafkapy SIGKILLed and restarted in the middle of a streams group rebalance; the word count stays exact.

Three Kafka Streams 4.4 instances (group.protocol=streams, exactly_once_v2) run; a fourth starts and,
as soon as one of the three begins to give tasks up (the rebalance is under way), the broker is
SIGKILLed and started again on the same port and data dir. The group comes back from
__consumer_offsets, the four instances settle on an assignment of every task, and the counts read
read_committed are exact and never written twice.
"""
from __future__ import annotations

import collections
import signal
import threading
import time
from pathlib import Path

import pytest

from conformance.streams_groups.harness import (STREAMS_BROKER_CONFIG, WordCountApp, produce_sentences,
                                                read_counts)

pytestmark = pytest.mark.timeout(300)


def test_broker_restart_mid_rebalance(broker_factory, tmp_path: Path) -> None:
    broker = broker_factory(STREAMS_BROKER_CONFIG)
    app = WordCountApp.create(broker.bootstrap, tmp_path, protocol="streams")
    try:
        expected = produce_sentences(broker.bootstrap, app.input, 2000, seed=11)
        for name in "abc":
            app.start(name)
        before = app.wait_stable("abc", timeout=120)
        during = collections.Counter()
        errors: list[BaseException] = []
        producer = threading.Thread(target=_produce_through_restart, args=(broker.bootstrap, app.input, during, errors))
        producer.start()
        try:
            app.start("d")
            deadline = time.monotonic() + 45
            while time.monotonic() < deadline:
                app.check_alive()
                if any(set(app.instances[n].tasks()[0]) != set(before[n][0]) for n in "abc"):
                    break
                time.sleep(0.05)
            else:
                pytest.fail(f"the fourth instance did not start a rebalance\n{app.tails()}", pytrace=False)
            mid_rebalance = app.stable("abcd") is None
            broker.restart(sig=signal.SIGKILL)
            restarted = time.monotonic()
            after = app.wait_stable("abcd", timeout=120)
            settled_s = time.monotonic() - restarted
        finally:
            producer.join(90)
        assert not errors and not producer.is_alive(), f"the producer failed across the restart: {errors}"
        expected.update(during)
        assert mid_rebalance, "the assignment had already settled when the broker was killed"
        assert after["d"][0], f"the fourth instance got no task after the restart: {after}"
        produce_sentences(broker.bootstrap, app.input, 500, seed=13, expected=expected)
        counts, problems = read_counts(broker.bootstrap, app.output, expected, timeout=90, alive=app.check_alive)
        assert not problems, f"counts written more than once: {problems[:10]}"
        assert counts == dict(expected), (
            {w: (counts.get(w), n) for w, n in expected.items() if counts.get(w) != n}, app.tails())
        for inst in app.instances.values():
            assert "UNCAUGHT" not in inst.log.read_text(errors="replace"), inst.tail()
        print(f"settled {settled_s:.1f} s after the restart: {after}")
    finally:
        app.stop_all()


def _produce_through_restart(bootstrap: str, topic: str, expected: collections.Counter,
                             errors: list[BaseException]) -> None:
    # The idempotent producer retries across the broker's restart; every sentence lands once.
    try:
        produce_sentences(bootstrap, topic, 2000, seed=12, rate=400.0, expected=expected)
    except BaseException as exc:  # reported by the test thread
        errors.append(exc)
