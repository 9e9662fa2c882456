"""KafkaCluster: several kafkapy brokers for a test, coordinating through an in-memory ZooKeeper
(kafkapy.testing.zookeeper), so that client code can be tested against leader moves and broker loss
with no Java, ZooKeeper or Docker.

    from kafkapy.testing import KafkaCluster

    with KafkaCluster(brokers=3) as cluster:
        cluster.create_topic("orders", partitions=1, replication_factor=3)
        producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers})
        cluster.move_leader("orders", 0, to=2)
        cluster.stop_broker(2)      # controlled shutdown; cluster.kill_broker(2) for a crash
        cluster.start_broker(2)     # same id, port and data
"""
from __future__ import annotations

import asyncio
import logging
import shutil
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..devcluster.storage import STORAGES, MemoryStorageUnavailable, data_directory
from ..metadata.store import PartitionMetadata
from ..protocol.errors import ErrorCode
from .broker import (
    CREATE_TOPICS_VERSION,
    HOST,
    KafkaBroker,
    KafkaBrokerError,
    check_topic_created,
    create_topic_request,
    error_name,
)
from .clients import KafkaClients
from .zookeeper import InMemoryZooKeeper

__all__ = ["ClusterRule", "KafkaCluster", "PartitionInfo"]

log = logging.getLogger(__name__)

START_TIMEOUT_S = 60.0
WAIT_TIMEOUT_S = 30.0
REQUEST_TIMEOUT_S = 5.0
METADATA_VERSION = 12
ELECT_LEADERS_VERSION = 2
ALTER_REASSIGNMENTS_VERSION = 0
SESSION_TIMEOUT_MS = 6000


# what describe() gives: the controller's record of a partition, filled from a broker's Metadata answer
PartitionInfo = PartitionMetadata


@dataclass(slots=True)
class ClusterRule:
    """A fault rule injected on several brokers: each broker's rule by id."""

    rules: dict[int, Any]

    def remove(self) -> bool:
        """Remove the rule everywhere; True if it was still active on at least one broker."""
        removed = False
        for rule in self.rules.values():
            try:
                removed = rule.remove() or removed
            except Exception:  # that broker has stopped: its rules went with it
                pass
        return removed


class KafkaCluster(KafkaClients):
    """Several kafkapy brokers and an in-memory ZooKeeper; a context manager (sync and async).

    Brokers have ids 1..`brokers`, listen on 127.0.0.1 on free ports (kept across restarts) and keep
    their data under one temporary directory removed by stop(). `isolation` is KafkaBroker's: "thread"
    (each broker on its own event-loop thread in this process) or "process" (child processes);
    `storage` too: "disk" or "memory" (every broker's logs on a memory file system, see storage.py).
    Keyword arguments are broker properties for every broker, e.g. `**{"num.partitions": "3"}`.
    `producer()`, `consumer()` and `admin()` make clients of the running brokers (KafkaClients),
    closed when the cluster stops.
    """

    def __init__(self, brokers: int = 3, *, isolation: str = "thread", storage: str = "disk", **properties: Any):
        if brokers < 1:
            raise ValueError("a cluster needs at least one broker")
        if isolation not in ("thread", "process"):
            raise ValueError(f"isolation must be 'thread' or 'process', not {isolation!r}")
        if storage not in STORAGES:
            raise ValueError(f"storage must be one of {', '.join(STORAGES)}, not {storage!r}")
        self.size = brokers
        self.isolation = isolation
        self.storage = storage
        self.properties = {key: str(value) for key, value in properties.items()}
        self.zookeeper: InMemoryZooKeeper | None = None
        self._dir: Path | None = None
        self._brokers: dict[int, KafkaBroker] = {}
        self._ports: dict[int, int] = {}

    # -- what tests use ------------------------------------------------------------------------------
    @property
    def bootstrap_servers(self) -> str:
        """host:port of every running broker, comma-separated."""
        running = [b.bootstrap_servers for _, b in sorted(self._brokers.items()) if b.running]
        if not running:
            raise KafkaBrokerError("no broker of the cluster is running")
        return ",".join(running)

    @property
    def running(self) -> bool:
        """True while at least one broker runs."""
        return any(b.running for b in self._brokers.values())

    @property
    def brokers(self) -> dict[int, KafkaBroker]:
        """Every broker by id (stopped ones too; see `.running`)."""
        return dict(self._brokers)

    def broker(self, broker_id: int) -> KafkaBroker:
        try:
            return self._brokers[broker_id]
        except KeyError:
            raise KeyError(f"no broker {broker_id} in this cluster (ids {sorted(self._brokers)})") from None

    @property
    def directory(self) -> Path | None:
        """The temporary directory holding every broker's data (None when stopped)."""
        return self._dir

    def describe(self, topic: str, via: int | None = None) -> dict[int, PartitionInfo]:
        """The partitions of `topic` as a running broker (or broker `via`) sees them; {} if unknown."""
        response = self._metadata([topic], via)
        for entry in response.topics:
            if entry.name == topic and entry.error_code == 0:
                return {p.partition_index: PartitionInfo(partition=p.partition_index, leader=p.leader_id,
                                                         replicas=tuple(p.replica_nodes), isr=tuple(p.isr_nodes),
                                                         leader_epoch=p.leader_epoch) for p in entry.partitions}
        return {}

    def leader(self, topic: str, partition: int) -> int | None:
        """The partition's leader as the metadata says (None if it has none or is unknown)."""
        info = self.describe(topic).get(partition)
        return info.leader if info is not None and info.leader >= 0 else None

    def controller(self) -> int | None:
        """The active controller's id as the metadata says (None if none is known)."""
        controller = self._metadata([], None).controller_id
        return controller if controller >= 0 else None

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int | None = None,
                     config: dict[str, str] | None = None, timeout: float = WAIT_TIMEOUT_S) -> None:
        """Create a topic (CreateTopics to the controller; default replication factor min(3, brokers))
        and wait until every running broker knows a leader for each partition."""
        factor = replication_factor if replication_factor is not None else min(3, self.size)
        request = create_topic_request(name, partitions, factor, config, timeout)
        check_topic_created(name, self._to_controller(request, CREATE_TOPICS_VERSION,
                                                      lambda r: r.topics[0].error_code, timeout))
        self._wait(lambda: self._everywhere(name, lambda info: len(info) == partitions
                                            and all(p.leader >= 0 for p in info.values())),
                   timeout, f"topic {name} with a leader for each of its {partitions} partitions on every broker")

    def move_leader(self, topic: str, partition: int, to: int, timeout: float = WAIT_TIMEOUT_S) -> None:
        """Make broker `to` the partition's leader, as a Kafka user would: AlterPartitionReassignments
        puts it first in the replica list (adding it if it is not a replica), then ElectLeaders
        (preferred). Returns once every running broker's metadata names `to` as the leader."""
        from ..protocol.messages import (
            AlterPartitionReassignmentsRequest,
            ElectLeadersRequest,
        )

        deadline = time.monotonic() + timeout
        if not self.broker(to).running:
            raise KafkaBrokerError(f"broker {to} is not running: it cannot become the leader of {topic}-{partition}")
        info = self.describe(topic).get(partition)
        if info is None:
            raise KafkaBrokerError(f"{topic}-{partition} is not known to the cluster")
        if info.leader == to and self._everywhere(topic, lambda i: partition in i and i[partition].leader == to):
            return
        replicas = [to, *(r for r in info.replicas if r != to)]
        if list(info.replicas) != replicas:
            reassign = AlterPartitionReassignmentsRequest(timeout_ms=int(timeout * 1000), topics=[
                AlterPartitionReassignmentsRequest.ReassignableTopic(name=topic, partitions=[
                    AlterPartitionReassignmentsRequest.ReassignablePartition(partition_index=partition,
                                                                             replicas=replicas)])])
            response = self._to_controller(reassign, ALTER_REASSIGNMENTS_VERSION, lambda r: r.error_code,
                                           deadline - time.monotonic())
            code = response.error_code or response.responses[0].partitions[0].error_code
            if code:
                raise KafkaBrokerError(f"AlterPartitionReassignments {topic}-{partition} -> {replicas}: "
                                       f"{error_name(code)}")
            # done when the replica list is the new one and the new first replica has caught up
            self._wait(lambda: (lambda i: i is not None and list(i.replicas) == replicas and to in i.isr)(
                self.describe(topic).get(partition)), deadline - time.monotonic(),
                f"{topic}-{partition}: replicas {replicas} with {to} in sync")
        elect = ElectLeadersRequest(election_type=0, timeout_ms=int(timeout * 1000), topic_partitions=[
            ElectLeadersRequest.TopicPartitions(topic=topic, partitions=[partition])])

        def elected() -> bool:
            response = self._to_controller(elect, ELECT_LEADERS_VERSION, lambda r: r.error_code,
                                           max(1.0, deadline - time.monotonic()))
            results = [p for t in response.replica_election_results for p in t.partition_result]
            code = response.error_code or (results[0].error_code if results else 0)
            if code not in (ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED):
                return False  # e.g. PREFERRED_LEADER_NOT_AVAILABLE while it catches up: ask again
            return self._everywhere(topic, lambda i: partition in i and i[partition].leader == to)

        self._wait(elected, deadline - time.monotonic(), f"{topic}-{partition}: broker {to} as leader everywhere")
        log.info("%s-%d: leader moved to broker %d", topic, partition, to)

    # -- fault injection (KafkaBroker.inject / recorded, testing/faults.py) ----------------------------
    def inject(self, api: str | int, *, broker: int | None = None, **rule: Any) -> Any:
        """KafkaBroker.inject on broker `broker`, or on every running broker (None). Returns that
        broker's rule, or a ClusterRule whose `remove()` removes the rule from all of them. A broker
        restarted later starts without rules, as after a real restart."""
        if broker is not None:
            return self.broker(broker).inject(api, **rule)
        return ClusterRule({i: self._brokers[i].inject(api, **rule) for i in self._running_ids()})

    def recorded(self, api: str | int | None = None, broker: int | None = None) -> list[Any]:
        """KafkaBroker.recorded of broker `broker`, or of every running broker merged by time."""
        if broker is not None:
            return self.broker(broker).recorded(api)
        merged = [r for i in self._running_ids() for r in self._brokers[i].recorded(api)]
        return sorted(merged, key=lambda r: getattr(r, "time", 0))

    def set_latency(self, ms: float, broker: int | None = None) -> None:
        """KafkaBroker.set_latency (answer every request `ms` later) on one broker or every running one."""
        for broker_id in [broker] if broker is not None else self._running_ids():
            self.broker(broker_id).set_latency(ms)

    # -- brokers coming and going ---------------------------------------------------------------------
    def stop_broker(self, broker_id: int, timeout: float = WAIT_TIMEOUT_S) -> None:
        """Stop a broker cleanly (controlled shutdown: its leaderships move first); data kept."""
        broker = self.broker(broker_id)
        if broker.running:
            broker.stop(timeout)
            log.info("broker %d stopped", broker_id)

    def kill_broker(self, broker_id: int) -> None:
        """Stop a broker abruptly, as kill -9: no controlled shutdown, nothing flushed, its ZooKeeper
        session left to expire (zookeeper.session.timeout.ms), after which the controller elects new
        leaders for its partitions. Data kept."""
        broker = self.broker(broker_id)
        if not broker.running:
            return
        if self.isolation == "thread":
            # An in-process broker's kazoo session would outlive the killed event loop, and the
            # controller would never see it die; make it look like a dead process's: the server stops
            # answering it (so no Close is sent) and the session expires after its timeout.
            zk_client = _zk_client_of(broker)
            if zk_client is not None and self.zookeeper is not None:
                session_id = zk_client.session_id
                if session_id is not None:
                    self.zookeeper.sever_session(session_id)
                zk_client.close()
        broker.kill()
        log.info("broker %d killed", broker_id)

    def start_broker(self, broker_id: int, timeout: float = START_TIMEOUT_S) -> KafkaBroker:
        """Start a stopped or killed broker again: same id, port and data. After a kill this first
        waits for its old ZooKeeper session to expire (until then Kafka refuses the id)."""
        old = self.broker(broker_id)
        if old.running:
            return old
        deadline = time.monotonic() + timeout
        assert self.zookeeper is not None
        self._wait(lambda: self.zookeeper.get(f"/brokers/ids/{broker_id}") is None, timeout,
                   f"the registration of killed broker {broker_id} to expire")
        broker = self._new_broker(broker_id, self._ports[broker_id])
        self._brokers[broker_id] = broker
        broker.start(max(1.0, deadline - time.monotonic()))
        self._wait(lambda: self.zookeeper.get(f"/brokers/ids/{broker_id}") is not None,
                   max(1.0, deadline - time.monotonic()), f"broker {broker_id} registered")
        log.info("broker %d started on port %d", broker_id, broker.port)
        return broker

    # -- life cycle -------------------------------------------------------------------------------------
    def start(self, timeout: float = START_TIMEOUT_S) -> KafkaCluster:
        if self.zookeeper is not None:
            return self
        deadline = time.monotonic() + timeout
        try:
            self._dir = data_directory(self.storage, prefix="kafkapy-cluster-")
        except MemoryStorageUnavailable as exc:
            raise KafkaBrokerError(str(exc)) from None
        try:
            # session timeouts from 1 s, so that a test may make kills noticed sooner
            self.zookeeper = InMemoryZooKeeper(min_session_timeout_ms=1000, max_session_timeout_ms=60000).start()
            for broker_id in range(1, self.size + 1):
                self._brokers[broker_id] = self._new_broker(broker_id, 0)
            # started side by side: each waits for its own ZooKeeper session and registration
            with ThreadPoolExecutor(self.size) as pool:
                for future in [pool.submit(b.start, timeout) for b in self._brokers.values()]:
                    future.result()
            for broker_id, broker in self._brokers.items():
                self._ports[broker_id] = broker.port
            ids = [str(i) for i in self._brokers]
            self._wait(lambda: sorted(self.zookeeper.get_children("/brokers/ids") or []) == sorted(ids)
                       and self.zookeeper.get("/controller") is not None,
                       deadline - time.monotonic(), "every broker registered and a controller elected")
            self._wait(lambda: all(len(self._metadata([], i).brokers) == self.size for i in self._brokers),
                       deadline - time.monotonic(), "every broker knowing every other")
        except BaseException:
            self.stop()
            raise
        log.info("kafka test cluster of %d brokers up: %s", self.size, self.bootstrap_servers)
        return self

    def stop(self) -> None:
        """Stop every broker and the ZooKeeper server; remove the cluster's directory."""
        brokers = [b for b in self._brokers.values() if b.running]
        # Cleanly, all at once: each broker's controlled shutdown moves what leaderships it can.
        if brokers:
            with ThreadPoolExecutor(len(brokers)) as pool:
                for future in [pool.submit(b.stop) for b in brokers]:
                    try:
                        future.result()
                    except Exception:
                        log.exception("a broker did not stop cleanly")
        for broker in self._brokers.values():
            if broker.running:  # did not stop in time
                broker.kill()
        if self.zookeeper is not None:
            self.zookeeper.stop()
            self.zookeeper = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> KafkaCluster:
        await asyncio.to_thread(self.start)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.stop)

    # -- plumbing ---------------------------------------------------------------------------------------
    def _new_broker(self, broker_id: int, port: int) -> KafkaBroker:
        assert self._dir is not None and self.zookeeper is not None
        factor = str(min(3, self.size))
        properties = {
            # what a cluster of this size can satisfy (devcluster's cluster_defaults)
            "offsets.topic.replication.factor": factor,
            "share.coordinator.state.topic.replication.factor": factor,
            "transaction.state.log.replication.factor": factor,
            "transaction.state.log.min.isr": str(min(2, self.size)),
            "default.replication.factor": factor,
            # a broker stopping last has nowhere to move its leaderships: give up on that quickly
            "controlled.shutdown.retry.backoff.ms": "500",
            **self.properties,
            "broker.id": str(broker_id),
            "zookeeper.connect": self.zookeeper.connect_string,
            "zookeeper.session.timeout.ms": self.properties.get("zookeeper.session.timeout.ms",
                                                                str(SESSION_TIMEOUT_MS)),
        }
        data_dir = self._dir / f"broker-{broker_id}"
        data_dir.mkdir(exist_ok=True)
        return KafkaBroker(isolation=self.isolation, data_dir=data_dir, port=port, **properties)

    def _running_ids(self) -> list[int]:
        return [i for i, b in sorted(self._brokers.items()) if b.running]

    def _request(self, broker_id: int, request: Any, version: int, timeout: float = REQUEST_TIMEOUT_S) -> Any:
        from ..net.client import request_once

        send = request_once(HOST, self._brokers[broker_id].port, request, version, timeout_s=timeout,
                            client_id="kafkapy-test-cluster")
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(send)
        # called from async code: this thread's loop is busy, so run the request on another thread
        with ThreadPoolExecutor(1) as pool:
            return pool.submit(asyncio.run, send).result()

    def _metadata(self, topics: list[str], via: int | None) -> Any:
        from ..net.client import BrokerConnectionError
        from ..protocol.messages import MetadataRequest

        request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
                                  allow_auto_topic_creation=False)
        failures = []
        for broker_id in [via] if via is not None else self._running_ids():
            try:
                return self._request(broker_id, request, METADATA_VERSION)
            except (BrokerConnectionError, OSError) as exc:
                failures.append(f"broker {broker_id}: {exc}")
        raise KafkaBrokerError("no broker answered Metadata: " + ("; ".join(failures) or "none is running"))

    def _everywhere(self, topic: str, check: Callable[[dict[int, PartitionInfo]], bool]) -> bool:
        """True if `check(partitions)` holds for the metadata of every running broker."""
        return all(check(self.describe(topic, via=i)) for i in self._running_ids())

    def _to_controller(self, request: Any, version: int, error_of: Callable[[Any], int], timeout: float) -> Any:
        """Send an admin request to the active controller, following it if it moves."""
        from ..net.client import BrokerConnectionError

        deadline = time.monotonic() + timeout
        while True:
            controller = None
            try:
                controller = self.controller()
                if controller is not None and controller in self._brokers:
                    response = self._request(controller, request, version, max(1.0, min(timeout, 30.0)))
                    if error_of(response) != ErrorCode.NOT_CONTROLLER:
                        return response
            except (BrokerConnectionError, KafkaBrokerError, OSError):
                pass
            if time.monotonic() > deadline:
                raise KafkaBrokerError(f"no controller answered {type(request).__name__} "
                                       f"(last known controller: {controller})")
            time.sleep(0.1)

    @staticmethod
    def _wait(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.05) -> None:
        from ..net.client import BrokerConnectionError

        deadline = time.monotonic() + max(timeout, 0.0)
        last_error: Exception | None = None
        while True:
            try:
                if predicate():
                    return
            except (BrokerConnectionError, KafkaBrokerError, OSError) as exc:
                last_error = exc
            if time.monotonic() > deadline:
                detail = f" (last error: {last_error})" if last_error is not None else ""
                raise KafkaBrokerError(f"timed out waiting for {what}{detail}")
            time.sleep(interval)


def _zk_client_of(broker: KafkaBroker) -> Any:
    """The KafkaZkClient of an in-process broker (None if it has none)."""
    server = getattr(broker, "_broker", None)
    member = getattr(server, "cluster", None)
    return getattr(member, "zk", None)
