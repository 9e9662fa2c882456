"""`kafkapy cluster describe`: brokers, controller and cluster id (DescribeCluster, else Metadata)."""
from __future__ import annotations

import argparse

from ..protocol.messages import DescribeClusterRequest
from .client import AdminClient
from .errors import KafkaApiError
from .output import print_json, print_table

__all__ = ["describe_cluster"]


def describe_cluster(client: AdminClient, args: argparse.Namespace) -> int:
    conn = client.any_connection()
    if DescribeClusterRequest.API_KEY in conn.versions:
        response = client.send(DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=1),
                               conn=conn)
        if response.error_code:
            raise KafkaApiError(response.error_code, "cannot describe the cluster", detail=response.error_message)
        cluster_id, controller = response.cluster_id, response.controller_id
        brokers = [(b.broker_id, b.host, b.port, b.rack) for b in response.brokers]
    else:
        response = client.metadata([])
        cluster_id, controller = response.cluster_id, response.controller_id
        brokers = [(b.node_id, b.host, b.port, b.rack) for b in response.brokers]
    brokers.sort()
    if args.format == "json":
        print_json({"cluster_id": cluster_id, "controller": controller,
                    "brokers": [{"id": i, "host": h, "port": p, "rack": r} for i, h, p, r in brokers]})
        return 0
    print(f"Cluster ID: {cluster_id}")
    print(f"Controller: {controller}")
    print()
    print_table(["BROKER", "HOST", "PORT", "RACK", "CONTROLLER"],
                [[i, h, p, r, "*" if i == controller else ""] for i, h, p, r in brokers])
    return 0
