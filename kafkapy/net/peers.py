"""Connections from this broker to the other brokers, for one purpose.

Kafka keeps a NetworkClient per purpose rather than one per broker: the controller's channel to
each broker, the broker-to-controller channels (AlterPartition; forwarding and producer id blocks),
the transaction marker channel, the replica fetchers. A `PeerConnections` is one such client: at
most one BrokerConnection per remote node, found by node id through `endpoint_of` (the metadata
cache's view: the endpoint on the inter-broker listener of a live broker, None otherwise), and,
for the controller channels, the current controller through `controller_id`.

What every inter-broker client needs and used to write itself lives here once:
- retargeting: a node that registered again at another address is reached there (the old socket
  is closed, requests on it fail with BrokerConnectionError);
- reconnection: a connection the peer closed, or that failed, is opened again by the next send;
- following the controller: `send_to_controller` asks `controller_id` each time and drops the
  connection to a node that stopped being the controller.

net/ knows nothing of the broker: lookups are callables given at construction, TLS and SASL are
BrokerConnection's `ssl_context` and `sasl` (security.inter_broker.inter_broker_options).
Errors are BrokerConnectionError (PeerUnavailableError when the node cannot be looked up); the
callers decide whether and when to retry, as Kafka's callers of NetworkClient do.
"""
from __future__ import annotations

import logging
import ssl
from collections.abc import Callable

from .client import BrokerConnection, BrokerConnectionError

__all__ = ["EndpointLookup", "PeerConnections", "PeerUnavailableError"]

log = logging.getLogger(__name__)

# node id -> (host, port) on the inter-broker listener, or None when the node is not live
EndpointLookup = Callable[[int], "tuple[str, int] | None"]


class PeerUnavailableError(BrokerConnectionError):
    """Nothing was sent: the node has no known endpoint, or no controller is known."""

    def __init__(self, message: str, node_id: int = -1):
        super().__init__(message)
        self.node_id = node_id


class PeerConnections:
    """One purpose's connections to the other brokers: `send(node_id, ...)`, `send_to_controller(...)`."""

    def __init__(self, purpose: str, endpoint_of: EndpointLookup, *,
                 controller_id: Callable[[], int] | None = None, client_id: str | None = None,
                 request_timeout_s: float = 30.0, connect_timeout_s: float = 10.0,
                 ssl_context: ssl.SSLContext | None = None,
                 sasl=None):
        self.purpose = purpose
        self._endpoint_of = endpoint_of
        self._controller_id = controller_id
        self.client_id = client_id or f"kafkapy-{purpose}"
        self.request_timeout_s = request_timeout_s
        self.connect_timeout_s = connect_timeout_s
        self._ssl_context = ssl_context
        self._sasl = sasl  # a SaslLogin (mechanism, username, password) or None
        self._connections: dict[int, BrokerConnection] = {}
        self._controller: int = -1  # the controller the last send_to_controller went to

    def __repr__(self) -> str:
        return f"PeerConnections({self.purpose}, nodes={sorted(self._connections)})"

    @property
    def nodes(self) -> list[int]:
        """The nodes a connection is kept to (open or to be reopened by the next send)."""
        return sorted(self._connections)

    def connection(self, node_id: int) -> BrokerConnection:
        """The connection to `node_id` at its current endpoint (made, or retargeted, as needed)."""
        endpoint = self._endpoint_of(node_id)
        if endpoint is None:
            self.disconnect(node_id)
            raise PeerUnavailableError(f"broker {node_id} has no known endpoint", node_id)
        host, port = endpoint
        connection = self._connections.get(node_id)
        if connection is None:
            connection = self._connections[node_id] = BrokerConnection(
                host, port, client_id=self.client_id, request_timeout_s=self.request_timeout_s,
                connect_timeout_s=self.connect_timeout_s, ssl_context=self._ssl_context,
                sasl=self._sasl)
        elif (connection.host, connection.port) != (host, port):
            log.info("%s: broker %d moved from %s:%d to %s:%d", self.purpose, node_id, connection.host,
                     connection.port, host, port)
            connection.retarget(host, port)
        return connection

    async def send(self, node_id: int, request, version: int, *, timeout_s: float | None = None):
        """Send `request` as `version` to broker `node_id`; the decoded response.

        Raises BrokerConnectionError when it may not have been answered (the next send reconnects)."""
        return await self.connection(node_id).send(request, version, timeout_s=timeout_s)

    def current_controller(self) -> int:
        """The controller's node id as the lookup knows it now (-1: none known)."""
        if self._controller_id is None:
            raise TypeError(f"{self.purpose}: no controller lookup was given")
        return self._controller_id()

    async def send_to_controller(self, request, version: int, *, timeout_s: float | None = None):
        """Send to the current controller, as Kafka's BrokerToControllerChannelManager does: the
        controller is looked up for every request, and the connection to a former one is closed."""
        controller_id = self.current_controller()
        if controller_id != self._controller:
            if self._controller >= 0:
                log.info("%s: the controller moved from broker %d to %d", self.purpose, self._controller,
                         controller_id)
                self.disconnect(self._controller)
            self._controller = controller_id
        if controller_id < 0:
            raise PeerUnavailableError("no controller known yet")
        return await self.send(controller_id, request, version, timeout_s=timeout_s)

    def disconnect(self, node_id: int) -> None:
        """Close the connection to `node_id`, failing its requests in flight (a later send reconnects)."""
        connection = self._connections.pop(node_id, None)
        if connection is not None:
            connection.close()

    def close(self) -> None:
        """Close every connection; the object stays usable (a later send connects again)."""
        for node_id in list(self._connections):
            self.disconnect(node_id)
        self._controller = -1
