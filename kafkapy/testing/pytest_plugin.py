"""The pytest plugin of kafkapy's test broker: fixtures `kafka_broker` (one broker for the session) and
`kafka_broker_factory` (brokers of a test's own), the `kafka_broker` marker and the `kafka_broker_*` ini
options. Loaded through the `pytest11` entry point as soon as kafkapy is installed (`-p no:kafkapy`
turns it off). See docs/testing.md, "From pytest".

Under pytest-xdist every worker is a pytest session of its own, so each gets its own session broker;
brokers listen on port 0 (a port the kernel picks) and keep data in their own temporary directory,
so workers never clash.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator

import pytest

if TYPE_CHECKING:  # imported by the fixtures: a pytest run that uses none of them pays nothing
    from .broker import KafkaBroker

__all__ = ["KafkaBrokerFactory"]

MARKER = "kafka_broker"
INI_PROPERTIES = "kafka_broker_properties"
INI_ISOLATION = "kafka_broker_isolation"
INI_STORAGE = "kafka_broker_storage"
INI_CLIENT = "kafka_broker_client"
_SESSION_BROKER = pytest.StashKey["KafkaBroker"]()
_CLIENTS_BEFORE = pytest.StashKey[int]()
# Test defaults under the ini option's properties: a consumer group's first rebalance at once, not
# after Kafka's 3 s wait for more members (Kafka's quickstart config and Spring's @EmbeddedKafka do
# the same); a test's consumer is its group's only member.
PLUGIN_DEFAULTS = {"group.initial.rebalance.delay.ms": "0"}
REGISTRY_FIXTURE = "schema_registry_url"
REGISTRY_LISTENER = "kafkapy.schema.registry.listener"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(INI_PROPERTIES, type="linelist", default=[],
                  help="kafkapy test brokers: Kafka broker properties, one key=value per line "
                       "(the kafka_broker fixture and the defaults of kafka_broker_factory; "
                       "group.initial.rebalance.delay.ms=0 unless set here)")
    parser.addini(INI_ISOLATION, default="thread",
                  help="kafkapy test brokers: 'thread' (in the pytest process, default) or 'process' "
                       "(a child process each)")
    parser.addini(INI_STORAGE, default="disk",
                  help="kafkapy test brokers: 'disk' (a temporary directory, default) or 'memory' (a memory "
                       "file system: the same log code, nothing on disk)")
    parser.addini(INI_CLIENT, default="",
                  help="kafkapy test brokers: the client library of the producer()/consumer()/admin() "
                       "helpers: confluent-kafka, kafka-python or aiokafka (default: the first installed)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(isolation=None, storage=None, **properties): Kafka broker properties (and isolation, "
        "storage) for the brokers this test starts with kafka_broker_factory; the closest marker wins per "
        "key (kafkapy)")


def _ini_properties(config: pytest.Config) -> dict[str, str]:
    properties = dict(PLUGIN_DEFAULTS)
    for line in config.getini(INI_PROPERTIES):
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise pytest.UsageError(f"{INI_PROPERTIES}: expected key=value, got {line!r}")
        properties[key.strip()] = value.strip()
    return properties


def _ini_options(config: pytest.Config) -> dict[str, str]:
    """The KafkaBroker arguments that are not Kafka properties, from the ini options."""
    from .storage import STORAGES

    isolation = (config.getini(INI_ISOLATION) or "thread").strip()
    if isolation not in ("thread", "process"):
        raise pytest.UsageError(f"{INI_ISOLATION} must be 'thread' or 'process', not {isolation!r}")
    storage = (config.getini(INI_STORAGE) or "disk").strip()
    if storage not in STORAGES:
        raise pytest.UsageError(f"{INI_STORAGE} must be one of {', '.join(STORAGES)}, not {storage!r}")
    return {"isolation": isolation, "storage": storage}


def _new_broker(config: pytest.Config, options: dict[str, str], properties: dict[str, Any]) -> KafkaBroker:
    from .broker import KafkaBroker

    broker = KafkaBroker(**options, **properties)
    broker.default_client = config.getini(INI_CLIENT).strip() or None
    return broker


def _given(**options: str | None) -> dict[str, str]:
    return {key: value for key, value in options.items() if value is not None}


class KafkaBrokerFactory:
    """What the `kafka_broker_factory` fixture gives: call it to start a broker for this test.

    `factory(**properties)`, or with `isolation="process"` and/or `storage="memory"`, returns a
    started KafkaBroker; its properties (and isolation, storage) are the ini options', then the test's
    `kafka_broker` markers', then the call's (later wins). Every broker it started is stopped when the test ends (its clients
    closed, its temporary directory removed), whether or not the test stopped it itself.
    """

    def __init__(self, config: pytest.Config, options: dict[str, str], defaults: dict[str, Any]):
        self._config = config
        self.options = options        # isolation and storage
        self.defaults = defaults      # Kafka properties
        self.brokers: list[KafkaBroker] = []

    def __call__(self, *, isolation: str | None = None, storage: str | None = None,
                 **properties: Any) -> KafkaBroker:
        options = {**self.options, **_given(isolation=isolation, storage=storage)}
        broker = _new_broker(self._config, options, {**self.defaults, **properties})
        broker.start()
        self.brokers.append(broker)
        return broker

    def stop_all(self) -> None:
        """Stop every broker started here (newest first); the first error is raised after all stopped."""
        error: BaseException | None = None
        while self.brokers:
            try:
                self.brokers.pop().stop()
            except Exception as exc:
                error = error or exc
        if error is not None:
            raise error


@pytest.fixture(scope="session")
def kafka_broker(request: pytest.FixtureRequest) -> Iterator[KafkaBroker]:
    """One kafkapy broker for the whole session (per xdist worker), with the ini options' properties.

    A test that kill()s or stop()s it gets it back before the next test that uses it (restarted on the
    same port, with its data if it was killed)."""
    config = request.config
    properties = _ini_properties(config)
    # the schema registry only when some test of the session asks for it (schema_registry_url)
    if any(REGISTRY_FIXTURE in getattr(item, "fixturenames", ()) for item in request.session.items):
        properties.setdefault(REGISTRY_LISTENER, "http://127.0.0.1:0")
    broker = _new_broker(config, _ini_options(config), properties)
    broker.start()
    config.stash[_SESSION_BROKER] = broker
    try:
        yield broker
    finally:
        del config.stash[_SESSION_BROKER]
        broker.stop()


@pytest.fixture
def schema_registry_url(kafka_broker: KafkaBroker) -> str:
    """The URL of the session broker's built-in schema registry (Confluent's REST API), for
    confluent-kafka's SchemaRegistryClient and serializers. The session broker runs the registry
    when a collected test asks for this fixture."""
    url = kafka_broker.schema_registry_url
    if url is None:
        raise pytest.UsageError(f"the session broker was started without {REGISTRY_LISTENER}: set it in the "
                                f"{INI_PROPERTIES} ini option")
    return url


@pytest.fixture
def kafka_broker_factory(request: pytest.FixtureRequest) -> Iterator[KafkaBrokerFactory]:
    """Start kafkapy brokers for this test: `kafka_broker_factory(**properties)`; all stopped at teardown."""
    config = request.config
    options = _ini_options(config)
    defaults: dict[str, Any] = _ini_properties(config)
    # farthest first (module, class, then the function), so the closest marker wins per key
    for marker in reversed(list(request.node.iter_markers(MARKER))):
        if marker.args:
            raise pytest.UsageError(f"@pytest.mark.{MARKER} takes keyword arguments only (Kafka properties "
                                    f"as **{{'num.partitions': '3'}}), got {marker.args!r}")
        kwargs = dict(marker.kwargs)
        options.update(_given(isolation=kwargs.pop("isolation", None), storage=kwargs.pop("storage", None)))
        defaults.update(kwargs)
    factory = KafkaBrokerFactory(config, options, defaults)
    try:
        yield factory
    finally:
        factory.stop_all()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    broker = item.config.stash.get(_SESSION_BROKER, None)
    if broker is not None and MARKER in getattr(item, "fixturenames", ()):
        item.stash[_CLIENTS_BEFORE] = broker.clients_made


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    # The session broker stops only when the session ends: the clients a test made from it (in its
    # body; those of fixtures live as long as their fixture) are closed when the test ends, so that a
    # long session does not pile up open clients and their threads.
    before = item.stash.get(_CLIENTS_BEFORE, None)
    broker = item.config.stash.get(_SESSION_BROKER, None)
    if before is not None and broker is not None and broker.clients_made > before:
        broker._revive_for_close()   # a test that killed it: its consumers could not close otherwise
        broker.close_clients(since=before)


def pytest_runtest_setup(item: pytest.Item) -> None:
    fixtures = getattr(item, "fixturenames", ())
    if MARKER not in fixtures:
        return
    # the session broker is shared: one test killing or stopping it must not fail the next ones
    broker = item.config.stash.get(_SESSION_BROKER, None)
    if broker is not None and not broker.running:
        broker.restart()
    if "kafka_broker_factory" not in fixtures and item.get_closest_marker(MARKER) is not None:
        item.warn(pytest.PytestWarning(
            f"@pytest.mark.{MARKER} applies to brokers from kafka_broker_factory; the session's "
            f"kafka_broker takes its properties from the {INI_PROPERTIES} ini option"))
