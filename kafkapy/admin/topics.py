"""`kafkapy topics list|describe|create|delete|alter`: kafka-topics.sh's modes as verbs."""
from __future__ import annotations

import argparse
import sys
import time

from ..protocol.error_codes import ErrorCode
from ..protocol.messages import CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest
from .client import AdminClient, topic_partitions  # still importable from here
from .errors import CliError, KafkaApiError
from .output import emit, print_json

__all__ = ["list_topics", "describe_topics", "create_topic", "delete_topics", "alter_topic", "topic_partitions",
           "parse_replica_assignment"]


def _admin_call(client: AdminClient, request, **kwargs):
    """Send a request that only the controller serves in ZooKeeper mode (KRaft brokers forward it)."""
    return client.send(request, node=client.controller(), **kwargs)


def list_topics(client: AdminClient, args: argparse.Namespace) -> int:
    response = client.metadata(None)
    names = sorted(t.name for t in response.topics if not (args.exclude_internal and t.is_internal))
    if args.format == "json":
        print_json(names)
    else:
        for name in names:
            print(name)
    return 0


def describe_topics(client: AdminClient, args: argparse.Namespace) -> int:
    response = client.metadata(args.topic or None)
    described = []
    for topic in sorted(response.topics, key=lambda t: t.name):
        if topic.error_code:
            if args.topic:
                raise KafkaApiError(topic.error_code, f"topic '{topic.name}' does not exist"
                                    if topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                                    else f"topic '{topic.name}' is not available")
            continue
        if args.exclude_internal and topic.is_internal:
            continue
        partitions = []
        for p in sorted(topic.partitions, key=lambda p: p.partition_index):
            row = {"topic": topic.name, "partition": p.partition_index, "leader": p.leader_id,
                   "replicas": list(p.replica_nodes), "isr": list(p.isr_nodes),
                   "offline": list(p.offline_replicas)}
            if args.under_replicated_partitions and len(p.isr_nodes) >= len(p.replica_nodes):
                continue
            if args.unavailable_partitions and p.leader_id >= 0:
                continue
            partitions.append(row)
        if (args.under_replicated_partitions or args.unavailable_partitions) and not partitions:
            continue
        replication = len(topic.partitions[0].replica_nodes) if topic.partitions else 0
        described.append({"topic": topic.name, "topic_id": str(topic.topic_id), "internal": topic.is_internal,
                          "partition_count": len(topic.partitions), "replication_factor": replication,
                          "partitions": partitions})
    if args.format == "json":
        print_json(described)
        return 0
    rows = [p for t in described for p in t["partitions"]]
    emit("table", rows, ["TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR"],
         ["topic", "partition", "leader", "replicas", "isr"])
    return 0


def parse_configs(items: list[str] | None) -> dict[str, str]:
    configs = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CliError(f"bad --config {item!r}: expected KEY=VALUE", exit_code=2)
        configs[key.strip()] = value
    return configs


def parse_replica_assignment(text: str) -> list[list[int]]:
    """kafka-topics.sh's --replica-assignment: partitions separated by commas, their replicas by colons."""
    try:
        assignments = [[int(b) for b in part.split(":")] for part in text.split(",")]
    except ValueError:
        raise CliError(f"bad --replica-assignment {text!r}: expected broker ids like 1:2,2:3,3:1", exit_code=2) from None
    if len({len(a) for a in assignments}) != 1 or any(len(set(a)) != len(a) for a in assignments):
        raise CliError("--replica-assignment: every partition needs the same number of distinct brokers", exit_code=2)
    return assignments


def create_topic(client: AdminClient, args: argparse.Namespace) -> int:
    configs = parse_configs(args.config)
    version = client.version(CreateTopicsRequest)
    partitions = args.partitions if args.partitions is not None else (-1 if version >= 4 else 1)
    replication = args.replication_factor if args.replication_factor is not None else (-1 if version >= 4 else 1)
    assignments = []
    if args.replica_assignment:
        if args.partitions is not None or args.replication_factor is not None:
            raise CliError("--replica-assignment sets the partitions and replicas: leave out --partitions and "
                           "--replication-factor", exit_code=2)
        assignments = parse_replica_assignment(args.replica_assignment)
        partitions = replication = -1
    topic = CreateTopicsRequest.CreatableTopic(
        name=args.topic, num_partitions=partitions, replication_factor=replication,
        assignments=[CreateTopicsRequest.CreatableReplicaAssignment(partition_index=i, broker_ids=ids)
                     for i, ids in enumerate(assignments)],
        configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])
    response = _admin_call(client, CreateTopicsRequest(topics=[topic], timeout_ms=int(client.timeout_s * 1000),
                                                       validate_only=args.dry_run))
    result = response.topics[0]
    if result.error_code == ErrorCode.TOPIC_ALREADY_EXISTS and args.if_not_exists:
        return 0
    if result.error_code:
        raise KafkaApiError(result.error_code, f"cannot create topic '{args.topic}'", detail=result.error_message)
    _wait_for_metadata(client, [args.topic], present=True)
    if args.format == "json":
        print_json({"topic": args.topic, "created": not args.dry_run, "topic_id": str(result.topic_id),
                    "partitions": result.num_partitions, "replication_factor": result.replication_factor})
    else:
        print(f"{'Validated' if args.dry_run else 'Created'} topic {args.topic}.")
    return 0


def _wait_for_metadata(client: AdminClient, topics: list[str], *, present: bool, limit_s: float = 5.0) -> None:
    """Like Kafka's tools, return once the brokers' metadata shows the change (bounded)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        response = client.metadata(topics)
        known = {t.name for t in response.topics if t.error_code == 0 and t.partitions}
        if (set(topics) <= known) if present else not (set(topics) & known):
            return
        time.sleep(0.05)


def delete_topics(client: AdminClient, args: argparse.Namespace) -> int:
    if not args.topic:
        raise CliError("say which topics: topics delete TOPIC... (or --topic TOPIC)", exit_code=2)
    version = client.version(DeleteTopicsRequest)
    timeout_ms = int(client.timeout_s * 1000)
    if version >= 6:
        request = DeleteTopicsRequest(topics=[DeleteTopicsRequest.DeleteTopicState(name=t) for t in args.topic],
                                      timeout_ms=timeout_ms)
    else:
        request = DeleteTopicsRequest(topic_names=list(args.topic), timeout_ms=timeout_ms)
    response = _admin_call(client, request)
    deleted, failure = [], None
    for result in response.responses:
        if result.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and args.if_exists:
            continue
        if result.error_code:
            failure = failure or KafkaApiError(result.error_code, f"cannot delete topic '{result.name}'",
                                               detail=result.error_message)
        else:
            deleted.append(result.name)
    if deleted:
        _wait_for_metadata(client, deleted, present=False)
    if args.format == "json":
        print_json({"deleted": deleted})
    else:
        for name in deleted:
            print(f"Deleted topic {name}.")
    if failure:
        raise failure
    return 0


def alter_topic(client: AdminClient, args: argparse.Namespace) -> int:
    if args.partitions is None and not args.config and not args.delete_config:
        raise CliError("topics alter needs --partitions N, --config KEY=VALUE or --delete-config KEY", exit_code=2)
    if args.partitions is not None:
        topic_partitions(client, [args.topic])  # a clear error for an unknown topic
        request = CreatePartitionsRequest(
            topics=[CreatePartitionsRequest.CreatePartitionsTopic(name=args.topic, count=args.partitions,
                                                                  assignments=None)],
            timeout_ms=int(client.timeout_s * 1000), validate_only=args.dry_run)
        result = _admin_call(client, request).results[0]
        if result.error_code:
            raise KafkaApiError(result.error_code, f"cannot change the partitions of '{args.topic}'",
                                hint="the count can only grow", detail=result.error_message)
        if not args.dry_run:
            deadline = time.monotonic() + 5.0
            while time.monotonic() < deadline and len(topic_partitions(client, [args.topic])[args.topic]) \
                    < args.partitions:
                time.sleep(0.05)
        print(f"{'Validated' if args.dry_run else 'Altered'} topic {args.topic}: {args.partitions} partitions.",
              file=sys.stderr if args.format == "json" else sys.stdout)
    if args.config or args.delete_config:
        from .configs import alter_resource

        topic_partitions(client, [args.topic])
        alter_resource(client, "topics", args.topic, parse_configs(args.config), list(args.delete_config or ()),
                       dry_run=args.dry_run)
        print(f"{'Validated' if args.dry_run else 'Altered'} configs of topic {args.topic}.",
              file=sys.stderr if args.format == "json" else sys.stdout)
    if args.format == "json":
        print_json({"topic": args.topic, "altered": not args.dry_run})
    return 0
