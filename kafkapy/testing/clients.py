"""KafkaClients: producer(), consumer() and admin() helpers on a test broker, for whichever Kafka
client library is installed, closed for the test when the broker stops.

Mixed into KafkaBroker (and anything else with a `bootstrap_servers` attribute):

    with KafkaBroker() as broker:
        producer = broker.producer()                       # confluent-kafka if installed
        consumer = broker.consumer(topics=["orders"])      # a fresh group, auto.offset.reset=earliest
        legacy = broker.consumer(topics="orders", client="kafka-python")
    # here: consumers closed, producers flushed (bounded) and closed, admin clients closed
"""
from __future__ import annotations

import asyncio
import importlib.util
import threading
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Iterable

__all__ = ["KafkaClients", "CLIENT_LIBRARIES", "client_library"]

# Tried in this order when no client= is given (module to import, name used in client=).
CLIENT_LIBRARIES: tuple[tuple[str, str], ...] = (
    ("confluent_kafka", "confluent-kafka"),
    ("kafka", "kafka-python"),
    ("aiokafka", "aiokafka"),
)
_ALIASES = {
    "confluent-kafka": "confluent-kafka", "confluent_kafka": "confluent-kafka", "confluent": "confluent-kafka",
    "kafka-python": "kafka-python", "kafka_python": "kafka-python", "kafka": "kafka-python",
    "aiokafka": "aiokafka",
}
# How long closing one client may take when the broker stops: a consumer whose broker is gone, or
# a producer whose records cannot be delivered, must not hold up the test session.
CLOSE_TIMEOUT_S = 5.0


def client_library(client: str | None = None) -> str:
    """Which client library to use: `client` normalised ("confluent-kafka", "kafka-python",
    "aiokafka"), or the first of those installed."""
    if client is not None:
        try:
            return _ALIASES[client.lower()]
        except KeyError:
            raise ValueError(f"client must be one of confluent-kafka, kafka-python, aiokafka; not {client!r}") from None
    for module, name in CLIENT_LIBRARIES:
        if importlib.util.find_spec(module) is not None:
            return name
    raise RuntimeError("no Kafka client library is installed: pip install confluent-kafka (or kafka-python, aiokafka)")


def _python_names(config: dict[str, Any]) -> dict[str, Any]:
    """kafka-python and aiokafka take keyword arguments: "auto.offset.reset" -> auto_offset_reset,
    so the same dotted names work whichever library a test picked."""
    return {key.replace(".", "_"): value for key, value in config.items()}


@dataclass(slots=True)
class _Tracked:
    """A client made by a helper, and how to close it."""
    kind: str                        # "consumer", "producer" or "admin": the order they are closed in
    client: Any
    close: Callable[[], Any]
    loop: asyncio.AbstractEventLoop | None = None   # aiokafka: the loop the client lives on
    serial: int = 0                                  # 1, 2, ... in the order the helpers made them


class KafkaClients:
    """Mixin: client helpers bound to `self.bootstrap_servers`, closed by `close_clients()` (which the
    class's own `stop()` calls first, see __init_subclass__).

    `config` is in the terms of the chosen library (confluent-kafka's dotted property names, or the
    keyword arguments of kafka-python and aiokafka, for which dotted names are translated too).
    `client`: "confluent-kafka", "kafka-python" or "aiokafka"; by default `default_client` if set,
    else the first of those installed. aiokafka clients are returned unstarted (`await
    producer.start()`), and must be made inside a running event loop.
    """

    default_client: str | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # The class's own stop() closes the helpers' clients first, while the broker still answers
        # (a consumer leaves its group, a producer delivers what it holds); wrapping it here keeps
        # the classes that mix this in free of any client code.
        stop = cls.__dict__.get("stop")
        if stop is not None and not getattr(stop, "_closes_clients", False):
            def stop_closing_clients(self: KafkaClients, *args: Any, **kw: Any) -> Any:
                if self._tracked_clients():
                    self._revive_for_close()
                    self.close_clients()
                return stop(self, *args, **kw)
            stop_closing_clients.__name__, stop_closing_clients.__qualname__ = stop.__name__, stop.__qualname__
            stop_closing_clients.__doc__ = stop.__doc__
            stop_closing_clients._closes_clients = True  # type: ignore[attr-defined]
            cls.stop = stop_closing_clients  # type: ignore[attr-defined]

    # -- the helpers -----------------------------------------------------------------------------
    def producer(self, *, client: str | None = None, **config: Any) -> Any:
        """A producer connected to this broker (closed when the broker stops)."""
        library = client_library(client or self.default_client)
        if library == "confluent-kafka":
            import confluent_kafka
            producer = confluent_kafka.Producer({"bootstrap.servers": self.bootstrap_servers, **config})

            def close() -> None:
                producer.flush(CLOSE_TIMEOUT_S)
                if hasattr(producer, "close"):   # newer confluent-kafka; older ones close it when collected
                    producer.close()
            return self._track("producer", producer, close)
        if library == "kafka-python":
            import kafka
            producer = kafka.KafkaProducer(**{"bootstrap_servers": self.bootstrap_servers, **_python_names(config)})
            return self._track("producer", producer, lambda: producer.close(timeout=CLOSE_TIMEOUT_S))
        loop = _client_loop()   # first: aiokafka would say the same less plainly
        import aiokafka
        producer = aiokafka.AIOKafkaProducer(**{"bootstrap_servers": self.bootstrap_servers, **_python_names(config)})
        return self._track("producer", producer, producer.stop, loop=loop)

    def consumer(self, group_id: str | None = None, topics: str | Iterable[str] | None = None, *,
                 client: str | None = None, **config: Any) -> Any:
        """A consumer connected to this broker, reading from the earliest offset, in `group_id` (default:
        a new group of its own) and subscribed to `topics` if given (closed when the broker stops)."""
        library = client_library(client or self.default_client)
        group = group_id or f"kafkapy-test-{uuid.uuid4().hex[:12]}"
        subscription = [topics] if isinstance(topics, str) else list(topics or ())
        if library == "confluent-kafka":
            import confluent_kafka
            consumer = confluent_kafka.Consumer({"bootstrap.servers": self.bootstrap_servers, "group.id": group,
                                                 "auto.offset.reset": "earliest", **config})
            if subscription:
                consumer.subscribe(subscription)
            return self._track("consumer", consumer, consumer.close)
        if library == "kafka-python":
            import kafka
            consumer = kafka.KafkaConsumer(*subscription, **{"bootstrap_servers": self.bootstrap_servers,
                                                             "group_id": group, "auto_offset_reset": "earliest",
                                                             **_python_names(config)})
            return self._track("consumer", consumer,
                               lambda: consumer.close(timeout_ms=int(CLOSE_TIMEOUT_S * 1000)))
        loop = _client_loop()
        import aiokafka
        consumer = aiokafka.AIOKafkaConsumer(*subscription, **{"bootstrap_servers": self.bootstrap_servers,
                                                               "group_id": group, "auto_offset_reset": "earliest",
                                                               **_python_names(config)})
        return self._track("consumer", consumer, consumer.stop, loop=loop)

    def admin(self, *, client: str | None = None, **config: Any) -> Any:
        """An admin client connected to this broker (closed when the broker stops)."""
        library = client_library(client or self.default_client)
        if library == "confluent-kafka":
            from confluent_kafka.admin import AdminClient
            admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, **config})
            # AdminClient has no close(); dropping our reference lets librdkafka's handle go
            return self._track("admin", admin, lambda: None)
        if library == "kafka-python":
            import kafka
            admin = kafka.KafkaAdminClient(**{"bootstrap_servers": self.bootstrap_servers, **_python_names(config)})
            return self._track("admin", admin, admin.close)
        loop = _client_loop()
        from aiokafka.admin import AIOKafkaAdminClient
        admin = AIOKafkaAdminClient(**{"bootstrap_servers": self.bootstrap_servers, **_python_names(config)})
        return self._track("admin", admin, admin.close, loop=loop)

    # -- clean-up ----------------------------------------------------------------------------------
    @property
    def clients_made(self) -> int:
        """How many clients the helpers have made so far; `close_clients(since=n)` closes the later ones."""
        return self.__dict__.get("_kafkapy_client_serial", 0)

    def close_clients(self, timeout: float = CLOSE_TIMEOUT_S, *, since: int = 0) -> None:
        """Close the clients the helpers made (after the first `since` of them) and that are still open:
        consumers first (they leave their groups), then producers (flushed for at most `timeout`
        seconds), then admin clients. Each close is bounded by `timeout`; one that hangs is left
        behind on a daemon thread."""
        tracked = self._tracked_clients()
        order = {"consumer": 0, "producer": 1, "admin": 2}
        pending = sorted((t for t in tracked if t.serial > since), key=lambda t: order[t.kind])
        tracked[:] = [t for t in tracked if t.serial <= since]
        for item in pending:
            _close_bounded(item, timeout)

    def _revive_for_close(self) -> None:
        """Bring a killed broker back (same port, same data) so that its clients can close: a
        confluent-kafka consumer whose broker is gone waits out its session timeout (45 s by default)
        in close(), trying to commit, and meanwhile retries the connection every few milliseconds."""
        if getattr(self, "running", True) or getattr(self, "port", None) is None or not hasattr(self, "restart"):
            return
        try:
            self.restart()
        except Exception:
            pass   # then the bounded close below is all we can do

    def _tracked_clients(self) -> list[_Tracked]:
        # set on first use: the classes mixing this in need not call an __init__ of ours
        return self.__dict__.setdefault("_kafkapy_clients", [])

    def _track(self, kind: str, client: Any, close: Callable[[], Any],
               loop: asyncio.AbstractEventLoop | None = None) -> Any:
        serial = self.__dict__["_kafkapy_client_serial"] = self.clients_made + 1
        self._tracked_clients().append(_Tracked(kind, client, close, loop, serial))
        return client


def _close_bounded(item: _Tracked, timeout: float) -> None:
    """Run item.close, for at most `timeout` seconds; exceptions (a client the test already closed) are
    ignored, since the point is only that nothing is left open."""
    if item.loop is not None:
        # aiokafka: stop() is a coroutine of the client's loop, which must still run and not be this thread's
        loop = item.loop
        if loop.is_closed() or not loop.is_running() or _running_loop() is loop:
            return
        try:
            asyncio.run_coroutine_threadsafe(item.close(), loop).result(timeout)
        except Exception:
            pass
        return

    def run() -> None:
        try:
            item.close()
        except Exception:
            pass

    closer = threading.Thread(target=run, name=f"kafkapy-close-{item.kind}", daemon=True)
    closer.start()
    closer.join(timeout)


def _client_loop() -> asyncio.AbstractEventLoop:
    """The running event loop an aiokafka client will live on."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        raise RuntimeError("aiokafka clients are made inside a running event loop (an async test or "
                           "coroutine); pass client='confluent-kafka' or 'kafka-python' for a blocking one") from None


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
