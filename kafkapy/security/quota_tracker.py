"""What the broker keeps of client quotas while none may be configured: `ClientQuotaTracker`
follows the metadata store and builds the quota accounting (security/quotas.py, imported then) only
once some quota exists; `BusyTime` times a handler for the request-percentage quota. Kept apart
from quotas.py so that a broker starts, and serves its first request, without loading that module.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..metadata.store import ChangeKind

if TYPE_CHECKING:
    from ..metadata.quotas import QuotaEntity
    from ..metadata.store import MetadataStore
    from .quotas import ClientQuotas

__all__ = ["BusyTime", "ClientQuotaTracker"]

log = logging.getLogger("kafkapy.security.quotas")


class BusyTime:
    """Awaits a handler coroutine and adds up the time it ran, leaving out the time it was parked
    (a long-poll Fetch, acks=all, JoinGroup): Kafka's request_percentage counts request thread
    time, not waiting. Dispatch can use `timed = BusyTime(handler(ctx, request));
    response = await timed` and hand `timed.seconds` to after_request as handler_seconds."""

    __slots__ = ("coro", "seconds")

    def __init__(self, coro):
        self.coro = coro
        self.seconds = 0.0

    def __await__(self):
        coro, send, error = self.coro, None, None
        while True:
            started = time.perf_counter()
            try:
                yielded = coro.throw(error) if error is not None else coro.send(send)
            except StopIteration as stop:
                self.seconds += time.perf_counter() - started
                return stop.value
            except BaseException:
                self.seconds += time.perf_counter() - started
                raise
            self.seconds += time.perf_counter() - started
            try:
                send, error = (yield yielded), None
            except BaseException as exc:  # cancellation and the like go into the handler
                send, error = None, exc


class ClientQuotaTracker:
    """The client quotas in force, following the metadata store: `current` is a ClientQuotas while
    some quota is configured anywhere and None otherwise, so that dispatch skips quota accounting
    entirely on a broker without quotas. The broker builds one (broker/broker.py)."""

    def __init__(self, metadata: MetadataStore) -> None:
        self.current: ClientQuotas | None = None
        self._metadata = metadata
        # a reload from ZooKeeper runs off the loop; only the newest one may apply its result
        self._generation = 0
        self._apply(metadata.describe_client_quotas())
        metadata.add_listener(self._on_change)

    def _apply(self, quotas: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        quotas = {entity: values for entity, values in quotas.items() if values}
        if not quotas:
            if self.current is not None:
                log.info("no client quotas configured any more: quota enforcement off")
            self.current = None
        elif self.current is None:
            from .quotas import ClientQuotas  # loaded with the first quota configured

            self.current = ClientQuotas(quotas)
            log.info("client quotas in force for %d entities", len(quotas))
        else:
            self.current.update(quotas)
            log.info("client quotas updated: %d entities", len(quotas))

    def _on_change(self, change) -> None:
        if change.kind is ChangeKind.CLIENT_QUOTAS_CHANGED:
            self._reload()

    def _reload(self) -> None:
        import asyncio

        self._generation += 1
        mine = self._generation
        store = self._metadata
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None or not hasattr(store, "zk"):
            self._apply(store.describe_client_quotas())
            return

        def done(future) -> None:
            if future.exception() is not None:
                log.error("could not read client quotas: %s", future.exception())
            elif mine == self._generation:  # a later reload supersedes this one
                self._apply(future.result())

        loop.run_in_executor(None, store.describe_client_quotas).add_done_callback(
            lambda f: loop.call_soon_threadsafe(done, f))
