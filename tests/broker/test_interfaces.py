"""The broker's parts are built with typed interfaces (broker/interfaces.py, metrics' MetricsSource,
tables' TablesHost, security/quotas.py's RequestContext): the objects the composition root hands them must have every
member those Protocols name, so that an interface cannot drift from what satisfies it."""
from __future__ import annotations

import inspect

import pytest

from kafkapy.broker.cluster_of_one import ClusterOfOne
from kafkapy.broker.dispatch import RequestConnection, RequestContext
from kafkapy.broker.interfaces import HandlerServices, Membership
from kafkapy.console.source import ConsoleSource
from kafkapy.metrics.collectors import MetricsSource
from kafkapy.security import quotas
from kafkapy.tables.host import TablesHost
from tests.broker.inprocess import InProcessBroker


def members(protocol: type) -> set[str]:
    """The attributes, properties and methods a Protocol (and the Protocols it extends) names."""
    names: set[str] = set()
    for cls in protocol.__mro__:
        if cls in (object,) or cls.__name__ in ("Protocol", "Generic"):
            continue
        names.update(getattr(cls, "__annotations__", {}))
        names.update(name for name, value in vars(cls).items()
                     if not name.startswith("_") and (inspect.isfunction(value) or isinstance(value, property)))
    return names


@pytest.fixture
def broker(tmp_path):
    node = InProcessBroker(tmp_path)
    yield node.broker
    node.close()


@pytest.mark.parametrize("protocol", [HandlerServices, MetricsSource, ConsoleSource, TablesHost])
def test_the_broker_has_every_member_of_the_interfaces_it_is_handed_as(broker, protocol):
    missing = sorted(name for name in members(protocol) if not hasattr(broker, name))
    assert not missing, f"Broker lacks {protocol.__name__}'s {missing}"


def test_both_memberships_have_every_member_of_membership(broker):
    from kafkapy.broker.cluster_member import ClusterMember

    for cls in (ClusterOfOne, ClusterMember):
        missing = sorted(name for name in members(Membership)
                         if not hasattr(cls, name) and name not in _instance_attributes(cls))
        assert not missing, f"{cls.__name__} lacks Membership's {missing}"
    assert isinstance(broker.cluster, ClusterOfOne)


def _instance_attributes(cls: type) -> set[str]:
    """Names assigned as `self.x = ...` in the class's __init__ (no instance needed)."""
    source = inspect.getsource(cls.__init__)
    return {line.split("self.", 1)[1].split("=", 1)[0].strip().split(":")[0]
            for line in source.splitlines() if line.strip().startswith("self.") and "=" in line}


def test_a_request_context_has_what_the_quotas_and_handlers_read(broker):
    from kafkapy.broker.connection import KafkaConnection

    ctx_members = set(dir(RequestContext))
    missing = sorted(name for name in members(quotas.RequestContext) - {"connection", "header"}
                     if name not in ctx_members)
    assert not missing, f"RequestContext lacks {missing}"
    conn = KafkaConnection(broker.connection_services)
    missing = sorted(name for name in members(RequestConnection) if not hasattr(conn, name))
    assert not missing, f"KafkaConnection lacks {missing}"


def test_connections_share_one_bundle_of_the_broker(broker):
    from kafkapy.broker.connection import ConnectionServices, KafkaConnection

    shared = broker.connection_services
    assert isinstance(shared, ConnectionServices)
    assert (shared.handlers, shared.connections, shared.memory_pool, shared.connection_quotas) == (
        broker, broker.connections, broker.memory_pool, broker.connection_quotas)
    conn = KafkaConnection(shared)
    assert conn.services is broker and not hasattr(conn, "broker")


def test_the_parts_are_built_with_their_collaborators_not_the_broker(broker):
    """Apart from the handler bundle (the broker by design, interfaces.py), no part the broker
    builds keeps the broker: the membership gets the later-built parts through attach, the fault
    injector its collaborators."""
    from kafkapy.broker.faults import AdvertisedNode, FaultInjector

    cluster = broker.cluster
    assert not any(value is broker for value in vars(cluster).values())
    assert (cluster._logs, cluster._partitions, cluster._replicas) == (broker.logs, broker.partitions,
                                                                      broker.replicas)
    assert cluster._fetch_sessions() is broker.fetch_sessions
    assert cluster._endpoints is broker.endpoints  # ports of port-0 listeners are filled in at start
    faults = broker.enable_faults()
    assert isinstance(faults, FaultInjector)
    assert not any(value is broker for value in vars(faults).values() if value is not None)
    this = faults._this_broker()
    missing = sorted(name for name in members(AdvertisedNode) if not hasattr(this, name))
    assert not missing, f"the injector's broker lacks AdvertisedNode's {missing}"
    assert (this.node_id, this.advertised_host, this.advertised_port, this.cluster_id) == (
        broker.node_id, broker.advertised_host, broker.advertised_port, broker.cluster_id)
