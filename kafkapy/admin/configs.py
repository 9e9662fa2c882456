"""`kafkapy configs describe|alter`: kafka-configs.sh for topics, brokers and client-metrics subscriptions."""
from __future__ import annotations

import argparse

from ..protocol.messages import AlterConfigsRequest, DescribeConfigsRequest, IncrementalAlterConfigsRequest
from .client import AdminClient, topic_partitions
from .errors import CliError, KafkaApiError
from .output import emit

__all__ = ["describe_configs", "alter_configs", "alter_resource", "split_config_list"]

# client-metrics: KIP-714 client telemetry subscriptions, as kafka-configs.sh --entity-type client-metrics
RESOURCE_TYPES = {"topics": 2, "brokers": 4, "broker-loggers": 8, "client-metrics": 16}
# DescribeConfigsResponse ConfigSource ids, by the names Kafka's tools print
SOURCES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
           4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG",
           7: "CLIENT_METRICS_CONFIG", 8: "GROUP_CONFIG"}
_DYNAMIC = {1, 2, 3, 6, 7, 8}
_SET, _DELETE = 0, 1


def split_config_list(text: str) -> dict[str, str]:
    """kafka-configs.sh's --add-config syntax: k=v,k2=[a,b] (square brackets keep commas in a value)."""
    configs, depth, current = {}, 0, []
    items = []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            items.append("".join(current))
            current = []
        else:
            current.append(ch)
    items.append("".join(current))
    for item in filter(None, (i.strip() for i in items)):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CliError(f"bad config {item!r}: expected KEY=VALUE", exit_code=2)
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        configs[key.strip()] = value
    return configs


def _resource(args: argparse.Namespace) -> tuple[str, str]:
    if getattr(args, "topic", None):
        return "topics", args.topic
    if getattr(args, "broker", None) is not None:
        return "brokers", str(args.broker)
    if getattr(args, "broker_defaults", False):
        return "brokers", ""
    entity_type = args.entity_type
    if entity_type is None:
        raise CliError("say which entity: --topic T, --broker ID, or --entity-type topics|brokers --entity-name N",
                       exit_code=2)
    if args.entity_default:
        if entity_type != "brokers":
            raise CliError("--entity-default applies to --entity-type brokers", exit_code=2)
        return entity_type, ""
    if args.entity_name is None:
        raise CliError(f"--entity-type {entity_type} needs --entity-name", exit_code=2)
    return entity_type, args.entity_name


def _route(client: AdminClient, entity_type: str, name: str) -> int | None:
    """Broker configs are answered by that broker; the rest by any broker."""
    if entity_type in ("brokers", "broker-loggers") and name:
        if not name.isdigit():
            raise CliError(f"a broker is named by its id, not {name!r}", exit_code=2)
        return int(name)
    return None


def describe_resource(client: AdminClient, entity_type: str, name: str) -> list:
    request = DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=RESOURCE_TYPES[entity_type], resource_name=name, configuration_keys=None)],
        include_synonyms=False, include_documentation=False)
    result = client.send(request, node=_route(client, entity_type, name)).results[0]
    if result.error_code:
        what = f"{entity_type[:-1]} '{name}'" if name else "the broker defaults"
        raise KafkaApiError(result.error_code, f"cannot describe the configs of {what}", detail=result.error_message)
    return result.configs


def describe_configs(client: AdminClient, args: argparse.Namespace) -> int:
    entity_type, name = _resource(args)
    if entity_type == "topics":
        topic_partitions(client, [name])
    entries = describe_resource(client, entity_type, name)
    rows = []
    for entry in sorted(entries, key=lambda e: e.name):
        if not args.all and entry.config_source not in _DYNAMIC:
            continue
        rows.append({"name": entry.name, "value": None if entry.is_sensitive else entry.value,
                     "source": SOURCES.get(entry.config_source, str(entry.config_source)),
                     "sensitive": entry.is_sensitive, "read_only": entry.read_only})
    if args.format == "json":
        emit("json", rows, [])
    else:
        emit("table", rows, ["NAME", "VALUE", "SOURCE"], ["name", "value", "source"])
    return 0


def alter_resource(client: AdminClient, entity_type: str, name: str, set_configs: dict[str, str],
                   delete: list[str], *, dry_run: bool = False) -> None:
    """Apply the changes with IncrementalAlterConfigs, or AlterConfigs (a read-modify-write) on old brokers."""
    node = _route(client, entity_type, name)
    conn = client.any_connection() if node is None else client.node(node)
    what = f"{entity_type[:-1]} '{name}'" if name else "the broker defaults"
    resource_type = RESOURCE_TYPES[entity_type]
    if IncrementalAlterConfigsRequest.API_KEY in conn.versions:
        configs = [IncrementalAlterConfigsRequest.AlterableConfig(name=k, config_operation=_SET, value=v)
                   for k, v in set_configs.items()]
        configs += [IncrementalAlterConfigsRequest.AlterableConfig(name=k, config_operation=_DELETE, value=None)
                    for k in delete]
        request = IncrementalAlterConfigsRequest(resources=[IncrementalAlterConfigsRequest.AlterConfigsResource(
            resource_type=resource_type, resource_name=name, configs=configs)], validate_only=dry_run)
    else:
        current = {e.name: e.value for e in describe_resource(client, entity_type, name)
                   if e.config_source in _DYNAMIC and not e.read_only}
        for key in delete:
            current.pop(key, None)
        current.update(set_configs)
        request = AlterConfigsRequest(resources=[AlterConfigsRequest.AlterConfigsResource(
            resource_type=resource_type, resource_name=name,
            configs=[AlterConfigsRequest.AlterableConfig(name=k, value=v) for k, v in current.items()])],
            validate_only=dry_run)
    result = client.send(request, conn=conn).responses[0]
    if result.error_code:
        raise KafkaApiError(result.error_code, f"cannot alter the configs of {what}", detail=result.error_message)


def alter_configs(client: AdminClient, args: argparse.Namespace) -> int:
    entity_type, name = _resource(args)
    set_configs: dict[str, str] = {}
    for text in args.add_config or ():
        set_configs.update(split_config_list(text))
    for item in args.config or ():
        set_configs.update(split_config_list(item))
    delete = [k.strip() for text in args.delete_config or () for k in text.split(",") if k.strip()]
    if not set_configs and not delete:
        raise CliError("nothing to change: give --add-config KEY=VALUE[,...] or --delete-config KEY[,...]",
                       exit_code=2)
    if entity_type == "topics":
        topic_partitions(client, [name])
    alter_resource(client, entity_type, name, set_configs, delete, dry_run=args.dry_run)
    what = f"{entity_type[:-1]} {name}" if name else "default broker"
    if args.format == "json":
        emit("json", [{"entity_type": entity_type, "entity_name": name, "set": set_configs, "deleted": delete,
                       "validated_only": args.dry_run}], [])
    else:
        print(f"{'Validated' if args.dry_run else 'Completed updating'} config for {what}.")
    return 0


