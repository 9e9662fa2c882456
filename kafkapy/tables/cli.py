"""`kafkapy tables list|describe`: the topics' Iceberg tables, read from the catalog directly (with the
broker's settings: --config server.properties, or --catalog-uri/--warehouse), and with
--bootstrap-server the lag of each partition against the log's last stable offset.

`describe` also shows the translation state each broker on this machine last recorded next to the
default catalog (<log dir>/iceberg/broker-<id>.status.json): running, or stopped with its error.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

__all__ = ["add_tables_command", "run_tables"]


def add_tables_command(commands) -> None:
    tables = commands.add_parser("tables", help="topics as Iceberg tables: list, describe",
                                 description="The Iceberg tables of topics with kafkapy.iceberg.mode set "
                                             "(docs/tables.md), read from the catalog.")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", "-c", type=Path, metavar="FILE",
                        help="the broker's server.properties (log.dirs, kafkapy.iceberg.*)")
    common.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="a broker config, as for kafkapy serve (repeatable)")
    common.add_argument("--catalog-uri", help="the catalog (default: kafkapy.iceberg.catalog.uri, else "
                                              "sqlite:///<first log dir>/iceberg/catalog.db)")
    common.add_argument("--warehouse", help="the warehouse (default: kafkapy.iceberg.warehouse, else "
                                            "<first log dir>/iceberg/warehouse)")
    common.add_argument("--bootstrap-server", "-b", metavar="HOST:PORT",
                        help="also show each partition's lag against the log (last stable offset)")
    common.add_argument("--json", action="store_true", help="print JSON")
    verbs = tables.add_subparsers(dest="tables_verb", metavar="VERB", required=True)
    verbs.add_parser("list", parents=[common], help="the tables: topic, snapshot, rows")
    describe = verbs.add_parser("describe", parents=[common],
                                help="a table's snapshot, per-partition offsets, rows, lag and state")
    describe.add_argument("topic", nargs="?", help="one topic (default: every table)")
    tables.set_defaults(tables_command=True)


def _settings(args):
    from ..broker.config import BrokerConfig
    from .catalog import CatalogSettings

    overrides = dict(item.split("=", 1) for item in args.override)
    if args.config is not None:
        config = BrokerConfig.from_properties_file(args.config, overrides)
    else:
        config = BrokerConfig(overrides)
    settings = CatalogSettings.from_config(config.get, config.log_dirs)
    uri = args.catalog_uri or settings.uri
    warehouse = args.warehouse or settings.warehouse
    return CatalogSettings(uri, warehouse), config


def _statuses(config) -> dict[str, dict]:
    """topic -> {"state", "error", "broker"} from the status files of brokers using these log dirs."""
    found: dict[str, dict] = {}
    for log_dir in config.log_dirs:
        for path in sorted((Path(log_dir) / "iceberg").glob("broker-*.status.json")):
            try:
                status = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            for topic, state in status.get("topics", {}).items():
                found[topic] = dict(state, broker=status.get("broker"))
    return found


def collect(catalog, topics: list[str] | None = None) -> list[dict]:
    """What `list` and `describe` show of each table of namespace `kafka` (dead-letter tables beside)."""
    from .catalog import DEAD_LETTER_SUFFIX, NAMESPACE, next_offsets

    try:
        identifiers = catalog.list_tables(NAMESPACE)
    except Exception:  # no namespace yet: no tables
        identifiers = []
    names = sorted(i[-1] for i in identifiers)
    out = []
    for name in names:
        if name.endswith(DEAD_LETTER_SUFFIX) or (topics and name not in topics):
            continue
        try:
            table = catalog.load_table((NAMESPACE, name))
        except Exception as exc:  # its metadata files cannot be read (the warehouse is failing)
            out.append({"table": f"{NAMESPACE}.{name}", "topic": name, "location": None, "snapshot_id": None,
                        "snapshot_time_ms": None, "rows": None, "next_offsets": {}, "columns": [],
                        "unreadable": f"{type(exc).__name__}: {exc}"})
            continue
        snapshot = table.current_snapshot()
        info = {"table": f"{NAMESPACE}.{name}", "topic": name, "location": table.metadata.location,
                "snapshot_id": None if snapshot is None else snapshot.snapshot_id,
                "snapshot_time_ms": None if snapshot is None else snapshot.timestamp_ms,
                "rows": _total_records(snapshot), "next_offsets": next_offsets(table),
                "columns": [f.name for f in table.schema().fields]}
        dead_name = name + DEAD_LETTER_SUFFIX
        if dead_name in names:
            dead = catalog.load_table((NAMESPACE, dead_name))
            info["dead_letters"] = _total_records(dead.current_snapshot())
            info["dead_letter_table"] = f"{NAMESPACE}.{dead_name}"
        out.append(info)
    return out


def _total_records(snapshot) -> int:
    if snapshot is None or snapshot.summary is None:
        return 0
    return int(snapshot.summary.get("total-records") or 0)


def run_tables(args: argparse.Namespace, log_offsets=None) -> int:
    """Run `kafkapy tables VERB`; `log_offsets(bootstrap, topics)` answers (topic, partition) -> last
    stable offset (kafkapy/cli.py passes the admin client's ListOffsets)."""
    from .catalog import open_catalog

    settings, config = _settings(args)
    catalog = open_catalog(settings, create_dirs=False)
    topics = [args.topic] if getattr(args, "topic", None) else None
    tables = collect(catalog, topics)
    if topics and not tables:
        print(f"no table for topic {args.topic} in {settings.uri}", file=sys.stderr)
        return 1
    if args.tables_verb == "describe":
        statuses = _statuses(config)
        ends = log_offsets(args.bootstrap_server, [t["topic"] for t in tables]) \
            if args.bootstrap_server and log_offsets is not None and tables else {}
        for info in tables:
            status = statuses.get(info["topic"])
            if status is not None:
                info["state"] = status.get("state")
                info["error"] = status.get("error")
            if ends:
                info["lag"] = {p: max(0, end - info["next_offsets"].get(p, 0))
                               for (topic, p), end in sorted(ends.items()) if topic == info["topic"]}
    if args.json:
        print(json.dumps(tables, indent=2, sort_keys=True))
        return 0
    if args.tables_verb == "list":
        print(f"{'TABLE':40} {'SNAPSHOT':>20} {'ROWS':>12}")
        for info in tables:
            print(f"{info['table']:40} {str(info['snapshot_id']):>20} {str(info['rows']):>12}")
        return 0
    import datetime

    for info in tables:
        when = "-" if info["snapshot_time_ms"] is None else datetime.datetime.fromtimestamp(
            info["snapshot_time_ms"] / 1000, datetime.timezone.utc).isoformat(timespec="milliseconds")
        print(f"Table: {info['table']}  Location: {info['location']}")
        if info.get("unreadable"):
            print(f"  Cannot read the table: {info['unreadable']}")
        print(f"  Snapshot: {info['snapshot_id']}  Committed: {when}  Rows: {info['rows']}"
              + (f"  Dead letters: {info['dead_letters']} ({info['dead_letter_table']})" if "dead_letters" in info
                 else ""))
        if "state" in info:
            print(f"  State: {info['state']}" + (f"  Error: {info['error']}" if info.get("error") else ""))
        print(f"  {'PARTITION':>9} {'NEXT-OFFSET':>12}" + (f" {'LAG':>10}" if "lag" in info else ""))
        partitions = sorted(set(info["next_offsets"]) | set(info.get("lag", {})))
        for p in partitions:
            line = f"  {p:>9} {info['next_offsets'].get(p, '-'):>12}"
            if "lag" in info:
                line += f" {info['lag'].get(p, '-'):>10}"
            print(line)
    return 0
