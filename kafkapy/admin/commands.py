"""The admin nouns and verbs of the `kafkapy` command: their argparse definitions and how they run.

Only argparse is imported here; each verb's module (and the protocol codecs behind it) is imported
when the verb runs, so `kafkapy serve` does not pay for the admin commands.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback

__all__ = ["add_admin_commands", "add_cluster_verbs", "run_admin", "ADMIN_NOUNS", "default_bootstrap"]

ADMIN_NOUNS = ("topics", "groups", "share-groups", "configs", "produce", "consume", "acls")
BOOTSTRAP_ENV = ("KAFKAPY_BOOTSTRAP", "KAFKA_BOOTSTRAP_SERVERS")
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def default_bootstrap() -> str:
    for name in BOOTSTRAP_ENV:
        if os.environ.get(name):
            return os.environ[name]
    return DEFAULT_BOOTSTRAP


def _connection_options(fmt: bool = True) -> argparse.ArgumentParser:
    options = argparse.ArgumentParser(add_help=False)
    group = options.add_argument_group("connection")
    group.add_argument("--bootstrap-server", "-b", metavar="HOST:PORT[,...]", default=None,
                       help=f"brokers to bootstrap from (default: $KAFKAPY_BOOTSTRAP, $KAFKA_BOOTSTRAP_SERVERS, "
                            f"else {DEFAULT_BOOTSTRAP})")
    group.add_argument("--command-config", metavar="FILE",
                       help="client properties (security.protocol, sasl.mechanism, sasl.jaas.config or "
                            "sasl.username/sasl.password, ssl.truststore.location as a PEM file)")
    group.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS",
                       help="how long to wait for each answer (default 30)")
    group.add_argument("--debug", action="store_true", help="show the traceback of an error")
    if fmt:
        group.add_argument("--format", choices=("table", "json"), default="table", help="output format")
    return options


def _verb(verbs, name: str, target: str, help_text: str, parents: list, **kwargs) -> argparse.ArgumentParser:
    parser = verbs.add_parser(name, help=help_text, description=help_text, parents=parents, **kwargs)
    parser.set_defaults(admin_target=target)
    return parser


def _nouns_parser(commands, name: str, help_text: str):
    noun = commands.add_parser(name, help=help_text, description=help_text)
    verbs = noun.add_subparsers(dest="verb", metavar="VERB", required=True)
    return verbs


def add_admin_commands(commands) -> None:
    """Add topics, groups, configs, produce, consume and acls to the `kafkapy` subcommands."""
    conn = _connection_options()
    _topics(commands, conn)
    _groups(commands, conn)
    _share_groups(commands, conn)
    _configs(commands, conn)
    _produce(commands, conn)
    _consume(commands)
    _acls(commands, conn)


def add_cluster_verbs(cluster_parser: argparse.ArgumentParser) -> None:
    """`kafkapy cluster describe` next to `kafkapy cluster [--brokers N]` (the dev cluster)."""
    verbs = cluster_parser.add_subparsers(dest="verb", metavar="[describe]", required=False)
    _verb(verbs, "describe", "cluster:describe_cluster", "the cluster's id, controller and brokers",
          [_connection_options()])


def _topics(commands, conn) -> None:
    verbs = _nouns_parser(commands, "topics", "list, describe, create, delete and alter topics (kafka-topics.sh)")
    p = _verb(verbs, "list", "topics:list_topics", "the topic names", [conn])
    p.add_argument("--exclude-internal", action="store_true", help="leave out internal topics")
    p = _verb(verbs, "describe", "topics:describe_topics", "partitions with leader, replicas and ISR", [conn])
    p.add_argument("--topic", "-t", action="append", metavar="TOPIC", help="only these topics (repeatable)")
    p.add_argument("topics", nargs="*", metavar="TOPIC", help="only these topics")
    p.add_argument("--exclude-internal", action="store_true")
    p.add_argument("--under-replicated-partitions", action="store_true",
                   help="only partitions whose ISR is smaller than their replicas")
    p.add_argument("--unavailable-partitions", action="store_true", help="only partitions without a leader")
    p = _verb(verbs, "create", "topics:create_topic", "create a topic", [conn])
    _topic_argument(p)
    p.add_argument("--partitions", type=int, metavar="N", help="number of partitions (default: the broker's)")
    p.add_argument("--replication-factor", type=int, metavar="N", help="replicas per partition (default: the broker's)")
    p.add_argument("--replica-assignment", metavar="B:B,B:B",
                   help="the replicas of each partition (partitions by commas, brokers by colons)")
    p.add_argument("--config", action="append", metavar="KEY=VALUE", help="a topic config (repeatable)")
    p.add_argument("--if-not-exists", action="store_true", help="succeed if the topic exists")
    p.add_argument("--dry-run", action="store_true", help="validate only")
    p = _verb(verbs, "delete", "topics:delete_topics", "delete topics", [conn])
    p.add_argument("--topic", "-t", action="append", metavar="TOPIC", help="a topic to delete (repeatable)")
    p.add_argument("topics", nargs="*", metavar="TOPIC")
    p.add_argument("--if-exists", action="store_true", help="succeed if the topic does not exist")
    p = _verb(verbs, "alter", "topics:alter_topic", "add partitions or change configs", [conn])
    _topic_argument(p)
    p.add_argument("--partitions", type=int, metavar="N", help="the new (larger) partition count")
    p.add_argument("--config", action="append", metavar="KEY=VALUE", help="set a topic config (repeatable)")
    p.add_argument("--delete-config", action="append", metavar="KEY", help="remove a topic config (repeatable)")
    p.add_argument("--dry-run", action="store_true", help="validate only")


def _topic_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topic", "-t", metavar="TOPIC", dest="topic_flag")
    parser.add_argument("topic", nargs="?", metavar="TOPIC", help="the topic (or --topic)")


def _groups(commands, conn) -> None:
    verbs = _nouns_parser(commands, "groups", "consumer groups: list, describe, reset-offsets, delete, delete-offsets "
                                              "(kafka-consumer-groups.sh)")
    p = _verb(verbs, "list", "groups:list_groups", "the group names", [conn])
    p.add_argument("--state", nargs="?", const="", metavar="STATES",
                   help="show each group's state; with STATES (comma-separated), only those")
    p.add_argument("--type", nargs="?", const="", metavar="TYPES",
                   help="show each group's type (classic, consumer); with TYPES (comma-separated), only those")
    p = _verb(verbs, "describe", "groups:describe_groups",
              "offsets and lag per partition (default), --members or --state", [conn])
    _group_arguments(p)
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--offsets", action="store_true", help="offsets and lag per partition (the default)")
    mode.add_argument("--members", action="store_true", help="the members and how many partitions each has")
    mode.add_argument("--state", action="store_true", help="the group's coordinator, strategy, state and size")
    p.add_argument("--verbose", action="store_true",
                   help="with --members: each member's assignment (and epochs, target assignment); with --state: epochs")
    p = _verb(verbs, "reset-offsets", "groups:reset_offsets",
              "move a group's committed offsets (a preview unless --execute)", [conn])
    _group_arguments(p)
    p.add_argument("--topic", "-t", action="append", metavar="TOPIC[:P,P...]",
                   help="a topic, optionally only some partitions (repeatable)")
    p.add_argument("--all-topics", action="store_true", help="every topic the group has offsets for")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--to-earliest", action="store_true")
    where.add_argument("--to-latest", action="store_true")
    where.add_argument("--to-current", action="store_true")
    where.add_argument("--to-offset", type=int, metavar="OFFSET")
    where.add_argument("--shift-by", type=int, metavar="N")
    where.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss")
    where.add_argument("--by-duration", metavar="PnDTnHnMnS")
    where.add_argument("--from-file", metavar="CSV", help="the offsets in a file as --export writes it")
    p.add_argument("--dry-run", action="store_true", help="only show the new offsets (the default)")
    p.add_argument("--execute", action="store_true", help="commit the new offsets")
    p.add_argument("--export", action="store_true", help="print the plan as CSV (TOPIC,PARTITION,OFFSET; GROUP first "
                                                         "with several groups)")
    p = _verb(verbs, "delete", "groups:delete_groups", "delete inactive groups and their offsets", [conn])
    _group_arguments(p)
    p = _verb(verbs, "delete-offsets", "groups:delete_offsets", "delete a group's offsets of some topics", [conn])
    _group_arguments(p, all_groups=False)
    p.add_argument("--topic", "-t", action="append", metavar="TOPIC[:P,P...]", help="repeatable")


def _share_groups(commands, conn) -> None:
    verbs = _nouns_parser(commands, "share-groups", "share groups (KIP-932): list, describe, reset-offsets, "
                                                    "delete-offsets, delete (kafka-share-groups.sh)")
    p = _verb(verbs, "list", "share_groups:list_share_groups", "the share group names", [conn])
    p.add_argument("--state", nargs="?", const="", metavar="STATES",
                   help="show each group's state; with STATES (comma-separated), only those")
    p = _verb(verbs, "describe", "share_groups:describe_share_groups",
              "start offset and lag per partition (default), --members or --state", [conn])
    _group_arguments(p)
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--offsets", action="store_true", help="start offset and lag per partition (the default)")
    mode.add_argument("--members", action="store_true", help="the members and their assignments")
    mode.add_argument("--state", action="store_true", help="the group's coordinator, state and size")
    p.add_argument("--verbose", action="store_true", help="also leader epochs, member epochs or group epochs")
    p = _verb(verbs, "reset-offsets", "share_groups:reset_share_offsets",
              "move an inactive share group's start offsets (a preview unless --execute)", [conn])
    _group_arguments(p)
    p.add_argument("--topic", "-t", action="append", metavar="TOPIC[:P,P...]",
                   help="a topic, optionally only some partitions (repeatable)")
    p.add_argument("--all-topics", action="store_true", help="every topic the group has share state for")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--to-earliest", action="store_true")
    where.add_argument("--to-latest", action="store_true")
    where.add_argument("--to-offset", type=int, metavar="OFFSET")
    where.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss")
    where.add_argument("--by-duration", metavar="PnDTnHnMnS")
    p.add_argument("--dry-run", action="store_true", help="only show the new start offsets (the default)")
    p.add_argument("--execute", action="store_true", help="reset the start offsets")
    p = _verb(verbs, "delete-offsets", "share_groups:delete_share_offsets",
              "delete an inactive share group's state of some topics", [conn])
    _group_arguments(p, all_groups=False)
    p.add_argument("--topic", "-t", action="append", metavar="TOPIC", help="repeatable")
    p = _verb(verbs, "delete", "share_groups:delete_share_groups", "delete inactive share groups", [conn])
    _group_arguments(p)


def _group_arguments(parser: argparse.ArgumentParser, all_groups: bool = True) -> None:
    parser.add_argument("--group", "-g", action="append", metavar="GROUP", dest="group_flag",
                        help="a group (repeatable)")
    parser.add_argument("group", nargs="*", metavar="GROUP", help="groups (or --group)")
    if all_groups:
        parser.add_argument("--all-groups", action="store_true", help="every group")


def _configs(commands, conn) -> None:
    verbs = _nouns_parser(commands, "configs", "describe and alter topic and broker configs (kafka-configs.sh)")
    for name, target, help_text in (("describe", "configs:describe_configs", "an entity's configs"),
                                    ("alter", "configs:alter_configs", "set or remove configs")):
        p = _verb(verbs, name, target, help_text, [conn])
        p.add_argument("--entity-type", choices=("topics", "brokers", "broker-loggers", "client-metrics"))
        p.add_argument("--entity-name", metavar="NAME")
        p.add_argument("--entity-default", action="store_true", help="the cluster-wide broker defaults")
        p.add_argument("--topic", "-t", metavar="TOPIC", help="short for --entity-type topics --entity-name TOPIC")
        p.add_argument("--broker", type=int, metavar="ID", help="short for --entity-type brokers --entity-name ID")
        if name == "describe":
            p.add_argument("--all", action="store_true", help="every config, defaults included (not only "
                                                              "dynamic ones)")
        else:
            p.add_argument("--add-config", action="append", metavar="K=V[,K=V]", help="configs to set")
            p.add_argument("--config", action="append", metavar="KEY=VALUE", help="a config to set (repeatable)")
            p.add_argument("--delete-config", action="append", metavar="K[,K]", help="configs to remove")
            p.add_argument("--dry-run", action="store_true", help="validate only")


def _produce(commands, conn) -> None:
    p = commands.add_parser("produce", parents=[conn], help="produce lines from stdin to a topic (kcat -P)",
                            description="Produce each line of stdin (or --file) as one record.")
    p.set_defaults(admin_target="produce:produce")
    p.add_argument("--topic", "-t", required=True, metavar="TOPIC")
    p.add_argument("--partition", "-p", type=int, metavar="N",
                   help="all records to this partition (default: by key, as the Java client; keyless: one "
                        "partition picked at random)")
    p.add_argument("--key-delimiter", "-K", metavar="DELIM", help="split each line into key DELIM value")
    p.add_argument("--delimiter", "-D", metavar="DELIM", help="record delimiter (default newline)")
    p.add_argument("--header", "-H", action="append", metavar="NAME=VALUE", help="a header on every record")
    p.add_argument("--compression", "-z", default="none", metavar="CODEC", help="none, gzip, snappy, lz4, zstd")
    p.add_argument("--acks", "-a", default="all", metavar="ACKS", help="all (-1), 1 or 0 (default all)")
    p.add_argument("--timestamp", type=int, metavar="MS", help="CreateTime of every record (default now)")
    p.add_argument("--file", "-f", metavar="FILE", help="read FILE instead of stdin")
    p.add_argument("--verbose", "-v", action="store_true", help="say how many records were produced")


def _consume(commands) -> None:
    conn = _connection_options(fmt=False)
    p = commands.add_parser("consume", parents=[conn], help="print a topic's records (kcat -C)",
                            description="Print a topic's records, by default each value on its own line.")
    p.set_defaults(admin_target="consume:consume")
    p.add_argument("--topic", "-t", required=True, metavar="TOPIC")
    p.add_argument("--partition", "-p", type=int, metavar="N", help="only this partition")
    p.add_argument("--offset", "-o", action="append", metavar="OFFSET",
                   help="beginning (default), end, stored, <offset>, -<n> (n before the end), s@<ts-ms> (first "
                        "record at or after the time); e@<ts-ms> stops before that time")
    p.add_argument("--exit", "-e", action="store_true", dest="exit_at_end", help="exit at the end of the partitions")
    p.add_argument("--count", "-c", type=int, metavar="N", help="exit after N records")
    p.add_argument("--fmt", "-f", metavar="FORMAT",
                   help="kcat format: %%t topic, %%p partition, %%o offset, %%k key, %%K key length, %%s value, "
                        "%%S value length, %%h headers, %%T timestamp, \\n \\t")
    p.add_argument("--key-delimiter", "-K", metavar="DELIM", help="print the key, DELIM, then the value")
    p.add_argument("--delimiter", "-D", default="\n", metavar="DELIM", help="after each record (default newline)")
    p.add_argument("--json", "-J", action="store_true", help="one JSON object per record (kcat -J's envelope)")
    p.add_argument("--format", choices=("table", "json"), default="table", help="json: same as -J")
    p.add_argument("--group", "-G", metavar="GROUP",
                   help="consume as a member of GROUP: its share of the partitions, from the committed offsets, "
                        "committing at rebalances and on exit")
    p.add_argument("--isolation-level", choices=("read_uncommitted", "read_committed"), default="read_uncommitted",
                   help="read_committed: only committed transactions, up to the last stable offset")


def _acls(commands, conn) -> None:
    verbs = _nouns_parser(commands, "acls", "list, create and delete ACLs (kafka-acls.sh)")
    for name, target, help_text in (("list", "acls:list_acls", "the ACLs matching the filter"),
                                    ("create", "acls:create_acls", "add ACLs"),
                                    ("delete", "acls:delete_acls", "remove the ACLs matching the filter")):
        p = _verb(verbs, name, target, help_text, [conn])
        p.add_argument("--topic", metavar="NAME")
        p.add_argument("--group", metavar="NAME")
        p.add_argument("--transactional-id", metavar="NAME")
        p.add_argument("--cluster", action="store_true")
        p.add_argument("--resource-pattern-type", metavar="TYPE", help="literal, prefixed (filters: any, match)")
        p.add_argument("--allow-principal", metavar="TYPE:NAME")
        p.add_argument("--deny-principal", metavar="TYPE:NAME")
        p.add_argument("--principal", metavar="TYPE:NAME", help="(filters) any permission")
        p.add_argument("--permission", metavar="allow|deny|any")
        p.add_argument("--host", metavar="HOST", help="default * for new ACLs")
        p.add_argument("--operation", action="append", metavar="OP",
                       help="read, write, create, delete, alter, describe, describe-configs, alter-configs, "
                            "idempotent-write, cluster-action, all (repeatable)")


def _normalise(args: argparse.Namespace) -> None:
    """Merge positional and flag forms (`topics create T` / `--topic T`, `groups describe G` / `--group G`)."""
    flag = getattr(args, "topic_flag", None)
    if hasattr(args, "topic_flag"):
        if flag and args.topic and flag != args.topic:
            from .errors import CliError

            raise CliError(f"two topics given ({flag!r} and {args.topic!r})", exit_code=2)
        args.topic = flag or args.topic
        if not args.topic:
            from .errors import CliError

            raise CliError("say which topic: --topic TOPIC", exit_code=2)
    if hasattr(args, "topics") and isinstance(getattr(args, "topics"), list):
        args.topic = list(args.topic or []) + args.topics
    if hasattr(args, "group_flag"):
        args.group = list(args.group_flag or []) + list(args.group or [])


def _read_properties(path: str) -> dict[str, str]:
    from .errors import CliError

    props = {}
    try:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                line = line.strip()
                if not line or line[0] in "#!":
                    continue
                key, _, value = line.partition("=")
                props[key.strip()] = value.strip()
    except OSError as exc:
        raise CliError(f"cannot read --command-config {path}: {exc.strerror or exc}", exit_code=2) from None
    return props


def run_admin(args: argparse.Namespace) -> int:
    """Run one admin verb; every failure ends as one line on stderr and an exit code, never a traceback."""
    from .errors import EXIT_KAFKA, CliError

    try:
        _normalise(args)
        module_name, function_name = args.admin_target.split(":")
        module = importlib.import_module(f"kafkapy.admin.{module_name}")
        from .client import AdminClient, SecurityOptions

        security = SecurityOptions.from_properties(_read_properties(args.command_config)) \
            if args.command_config else None
        with AdminClient(args.bootstrap_server or default_bootstrap(), timeout_s=args.timeout,
                         security=security) as client:
            return getattr(module, function_name)(client, args)
    except CliError as exc:
        if args.debug:
            traceback.print_exc()
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:  # `kafkapy consume ... | head`
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so that the flush at exit does not complain again
        return 0
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a bug or a broker answer we do not understand: one line, the rest with --debug
        if args.debug:
            traceback.print_exc()
        print(f"error: unexpected {type(exc).__name__}: {exc} (run with --debug for the traceback)", file=sys.stderr)
        return EXIT_KAFKA
