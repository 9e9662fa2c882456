"""Pytest fixtures and helpers for tests that run a ZooKeeper-mode kafkapy cluster: a LocalCluster
(kafkapy/devcluster/brokers.py: a Java ZooKeeper and brokers started by the broker launcher).

    from conformance.cluster_harness import cluster3, describe, wait_for_isr, wait_for_leader  # noqa: F401

    def test_leader_moves(cluster3):
        ...create topic "t" with replication factor 3...
        wait_for_isr(cluster3, "t", 3)
        old = describe(cluster3, "t")[0].leader
        cluster3.broker(old).kill9()
        new = wait_for_leader(cluster3, "t", 0, not_in=(old,))

Fixtures: `cluster3` (module scope, 3 brokers), or `my_cluster = cluster_fixture(2, {...})` in a
test module for another size or other broker settings. `start_cluster(tmp_path, ...)` starts one
inside a test (the caller stops it; LocalCluster is a context manager). When Java or ZooKeeper
is missing these skip with a reason starting "!!! "; a broker that does not start fails the test.

The helpers read cluster state the way a client sees it: a Metadata request to one running
broker (the first that answers, in id order, or the one named by `via`), so they keep working
while some brokers are down. Set KAFKAPY_TEST_PYTHON to run the brokers under another interpreter.
"""
from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, TypeVar

import pytest
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from conformance.broker_process import PYTHON_ENV
from conformance.kafka_wire import ConnectionClosed, RawConnection
from kafkapy.devcluster.brokers import LocalClusterStartError, LocalCluster
from kafkapy.devcluster.launcher import stop_children_on_sigterm
from kafkapy.devcluster.netns import NetworkLab
from kafkapy.devcluster.zookeeper import JavaZooKeeper, ZooKeeperStartError

__all__ = [
    "ClusterUnreachable",
    "PartitionState",
    "cluster3",
    "cluster_fixture",
    "controller_id",
    "describe",
    "start_cluster",
    "wait_for_isr",
    "wait_for_leader",
    "wait_until",
]

T = TypeVar("T")
METADATA_VERSION = 12
REQUEST_TIMEOUT_S = 3.0
DEFAULT_WAIT_S = 30.0


class ClusterUnreachable(RuntimeError):
    """No running broker of the cluster answered a Metadata request."""


@dataclass(frozen=True, slots=True)
class PartitionState:
    """One partition as a broker's Metadata response describes it."""

    leader: int  # -1 when there is none
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader_epoch: int = -1
    offline_replicas: tuple[int, ...] = ()
    error_code: int = 0


# ------------------------------------------------------------------ starting clusters

def start_cluster(tmp_path: Path, brokers: int = 3, overrides: Mapping[str, object] | None = None,
                  timeout: float = 60.0, await_registration: bool = True,
                  network: NetworkLab | None = None, control: bool = False, log_dirs: int = 1,
                  clocks: bool = False) -> LocalCluster:
    """Start ZooKeeper and `brokers` kafkapy brokers under `tmp_path`; the caller stops the cluster.

    Skips the test ("!!! ...") when ZooKeeper cannot run here; fails it when a broker does not start.
    With `network` (an open kafkapy.devcluster.netns.NetworkLab) ZooKeeper and each broker run in
    a network namespace of their own, so that a test can partition them. `control`, `log_dirs` and
    `clocks`: see LocalCluster (a control endpoint, that many log.dirs, a movable wall clock per broker).
    """
    available, reason = JavaZooKeeper.available()
    if not available:
        pytest.skip(f"!!! ZooKeeper is not available, cluster tests cannot run: {reason}")
    # The launcher's SIGTERM cleanup (every broker process) installed first: LocalCluster's own
    # (brokers, then its ZooKeeper) runs and then hands the signal on to it.
    stop_children_on_sigterm()
    cluster = LocalCluster(tmp_path, brokers=brokers, overrides=overrides,
                           python=os.environ.get(PYTHON_ENV) or None, await_registration=await_registration,
                           network=network, control=control, log_dirs=log_dirs,
                           clocks=clocks)
    try:
        cluster.start(timeout)
    except (LocalClusterStartError, ZooKeeperStartError) as exc:
        message = str(exc)
    else:
        return cluster
    # Outside the except block, so the report shows the message without a chained traceback.
    pytest.fail(f"kafkapy cluster could not start:\n{message}", pytrace=False)


def cluster_fixture(brokers: int = 3, overrides: Mapping[str, object] | None = None,
                    scope: str = "module") -> Any:
    """A fixture giving the tests of one module (by default) a running cluster:

        cluster2 = cluster_fixture(2, {"default.replication.factor": "2"})
    """

    @pytest.fixture(scope=scope)  # type: ignore[call-overload]  # scope is one of pytest's literals
    def running_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
        cluster = start_cluster(tmp_path_factory.mktemp(f"cluster{brokers}-"), brokers, overrides)
        try:
            yield cluster
        finally:
            cluster.stop()

    return running_cluster


cluster3 = cluster_fixture(3)


# ------------------------------------------------------------------ waiting

def wait_until(predicate: Callable[[], T], timeout: float = DEFAULT_WAIT_S, interval: float = 0.1,
               message: str = "condition", ignore: tuple[type[Exception], ...] = ()) -> T:
    """Call `predicate` until it returns something truthy and return that.

    Exceptions of the `ignore` types count as "not yet". After `timeout` s raises AssertionError
    naming `message`, the last value and the last ignored exception.
    """
    deadline = time.monotonic() + timeout
    last: object = None
    last_error: Exception | None = None
    while True:
        try:
            last = predicate()
            if last:
                return last  # type: ignore[return-value]  # truthy, so not the initial None
        except ignore as exc:
            last_error = exc
        if time.monotonic() >= deadline:
            detail = f"; last error: {last_error!r}" if last_error is not None else ""
            raise AssertionError(f"{message}: not reached within {timeout:g} s; last value: {last!r}{detail}")
        time.sleep(interval)


def wait_for_isr(cluster: LocalCluster, topic: str, size: int, timeout: float = DEFAULT_WAIT_S,
                 partitions: Iterable[int] | None = None) -> dict[int, PartitionState]:
    """Wait until every partition of `topic` (or those in `partitions`) has exactly `size` in-sync
    replicas and a leader; returns the topic's state."""
    wanted = None if partitions is None else set(partitions)

    def reached() -> dict[int, PartitionState] | None:
        state = describe(cluster, topic)
        chosen = [state.get(p) for p in wanted] if wanted is not None else list(state.values())
        if chosen and all(p is not None and len(p.isr) == size and p.leader >= 0 for p in chosen):
            return state
        return None

    return wait_until(reached, timeout, message=f"{topic}: ISR of size {size}{_logs_hint(cluster)}",
                      ignore=(ClusterUnreachable,))


def wait_for_leader(cluster: LocalCluster, topic: str, partition: int, not_in: Iterable[int] = (),
                    timeout: float = DEFAULT_WAIT_S) -> int:
    """Wait until `topic`-`partition` has a leader that is not in `not_in`; returns its id."""
    excluded = set(not_in)

    def leader() -> int | None:
        state = describe(cluster, topic).get(partition)
        if state is not None and state.leader >= 0 and state.leader not in excluded:
            return state.leader
        return None

    # The result is a broker id, and broker ids start at 1, so a found leader is always truthy.
    return wait_until(leader, timeout, ignore=(ClusterUnreachable,),
                      message=f"{topic}-{partition}: a leader not in {sorted(excluded)}{_logs_hint(cluster)}")


def _logs_hint(cluster: LocalCluster) -> str:
    return f" (broker logs: {cluster.work_dir}/broker-*.log)"


# ------------------------------------------------------------------ reading cluster state

def describe(cluster: LocalCluster, topic: str, via: int | None = None) -> dict[int, PartitionState]:
    """The partitions of `topic` by number, as one running broker sees them ({} if it does not
    know the topic). Raises ClusterUnreachable if no running broker answers."""
    response = _metadata(cluster, [topic], via)
    for entry in response.topics:
        if entry.name != topic or not entry.partitions:
            continue
        return {
            p.partition_index: PartitionState(
                leader=p.leader_id, replicas=tuple(p.replica_nodes), isr=tuple(p.isr_nodes),
                leader_epoch=p.leader_epoch, offline_replicas=tuple(p.offline_replicas), error_code=p.error_code)
            for p in entry.partitions
        }
    return {}


def controller_id(cluster: LocalCluster, via: int | None = None) -> int:
    """The controller's broker id as a running broker reports it (-1: none known).
    Raises ClusterUnreachable if no running broker answers."""
    return _metadata(cluster, [], via).controller_id


def _metadata(cluster: LocalCluster, topics: list[str], via: int | None) -> Any:
    """A Metadata response from broker `via`, or from the first running broker that answers."""
    nodes = [cluster.broker(via)] if via is not None else [n for n in cluster.brokers.values() if n.is_running()]
    request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
                              allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    request.with_header(correlation_id=1, client_id="kafkapy-cluster-harness")
    payload = bytes(request.encode(version=METADATA_VERSION, header=True, framed=True))
    failures = []
    for node in nodes:
        try:
            with RawConnection(node.bootstrap, timeout=REQUEST_TIMEOUT_S) as conn:
                body = conn.roundtrip(payload)
        except (OSError, ConnectionClosed, socket.timeout) as exc:
            failures.append(f"broker {node.broker_id}: {exc!r}")
            continue
        return MetadataResponse.decode(body, version=METADATA_VERSION, header=True)
    raise ClusterUnreachable("no broker answered Metadata: " + ("; ".join(failures) or "none is running"))
