"""Pytest fixtures that give a test a real kafkapy broker (or an external one).

Use from any conftest.py:

    from conformance.pytest_broker import *  # noqa: F401,F403  (fixtures + report hook)

Fixtures:
    broker            module-scoped broker (kafkapy process, or KAFKAPY_TEST_BOOTSTRAP).
                      .bootstrap "127.0.0.1:port", .data_dir, .stop(sig), .restart(), .kill9()
    broker_overrides  module-scoped dict of Kafka properties for `broker`; override it in a
                      test module to configure that module's broker.
    broker_factory    function-scoped: broker_factory({"prop": "value"}) starts a private
                      kafkapy process for one test (skips when an external broker is used,
                      since such tests need to restart or reconfigure the broker).
    topic_name        function-scoped: a fresh topic name derived from the test name.

Environment:
    KAFKAPY_TEST_BOOTSTRAP=host:port   run against that broker instead of starting kafkapy.
    KAFKAPY_TEST_MISSING_BROKER=skip   skip (loudly) instead of error when kafkapy cannot start.
    KAFKAPY_TEST_KEEP_DATA=1           keep broker work dirs (data + broker.log) after the run.
"""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path
from typing import Callable, Iterator, Mapping

import pytest

from conformance.broker_process import (
    BOOTSTRAP_ENV,
    BrokerProcess,
    BrokerStartError,
    ExternalBroker,
    broker_from_env,
    external_bootstrap,
    start_broker,
)

__all__ = [
    "broker",
    "broker_overrides",
    "broker_factory",
    "topic_name",
    "pytest_runtest_makereport",
    "is_external_broker",
]

MISSING_BROKER_ENV = "KAFKAPY_TEST_MISSING_BROKER"


def is_external_broker() -> bool:
    """True when the tests run against KAFKAPY_TEST_BOOTSTRAP instead of a kafkapy process."""
    return external_bootstrap() is not None


def _start_or_fail(start: Callable[[], BrokerProcess | ExternalBroker]) -> BrokerProcess | ExternalBroker:
    try:
        return start()
    except BrokerStartError as exc:
        message = str(exc)
    # Outside the except block, so the report shows the message without a chained traceback.
    if os.environ.get(MISSING_BROKER_ENV) == "skip":
        pytest.skip(f"!!! kafkapy broker could not start ({MISSING_BROKER_ENV}=skip): {message}")
    pytest.fail(f"kafkapy broker could not start:\n{message}", pytrace=False)


@pytest.fixture(scope="module")
def broker_overrides() -> dict[str, str]:
    """Kafka properties for this module's `broker`; redefine in a module to change them."""
    return {}


@pytest.fixture(scope="module")
def broker(
    broker_overrides: Mapping[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerProcess | ExternalBroker]:
    """A running broker shared by the tests of one module, stopped at module teardown."""
    if is_external_broker() and broker_overrides:
        # Loud but not fatal: the external broker keeps its own configuration.
        print(f"WARNING: {BOOTSTRAP_ENV} is set; ignoring broker overrides {dict(broker_overrides)}")
    work_dir = tmp_path_factory.mktemp("broker")
    instance = _start_or_fail(lambda: broker_from_env(broker_overrides, work_dir=work_dir))
    try:
        yield instance
    finally:
        instance.close()


@pytest.fixture
def broker_factory(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., BrokerProcess]]:
    """Start private kafkapy processes for one test: broker_factory({"prop": "value"})."""
    if is_external_broker():
        pytest.skip(
            f"needs its own kafkapy process (restart/reconfigure); {BOOTSTRAP_ENV} points at an external broker"
        )
    started: list[BrokerProcess] = []

    def factory(overrides: Mapping[str, object] | None = None) -> BrokerProcess:
        work_dir = tmp_path_factory.mktemp("broker")
        instance = _start_or_fail(lambda: start_broker(overrides=overrides, work_dir=work_dir))
        assert isinstance(instance, BrokerProcess)
        started.append(instance)
        return instance

    factory.started_brokers = started  # type: ignore[attr-defined]  # read by the report hook
    try:
        yield factory
    finally:
        for instance in started:
            instance.close()


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A topic name unique to this test run, readable in broker logs."""
    base = re.sub(r"[^a-zA-Z0-9._-]+", "_", request.node.name)[:150]
    return f"{base}-{uuid.uuid4().hex[:8]}"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    """Attach the broker's output tail to the report of a failed test that used a broker."""
    report = yield
    if report.failed:
        brokers = []
        funcargs = getattr(item, "funcargs", {})
        for value in funcargs.values():
            if isinstance(value, BrokerProcess):
                brokers.append(value)
            brokers.extend(getattr(value, "started_brokers", ()))
        for instance in brokers:
            report.sections.append(
                (f"kafkapy broker {instance.bootstrap} output (tail of {instance.log_path})", instance.stderr_tail())
            )
    return report
