"""The `kafkapy` command line: `kafkapy serve [--config server.properties] [--override key=value ...]`,
`kafkapy cluster [--brokers N] [--dir DIR] [--base-port PORT] [--override key=value ...]` (a local dev
cluster) and the admin commands `kafkapy <noun> <verb>` (topics, groups, configs, produce, consume,
acls, `cluster describe`: kafkapy/admin/)."""
from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse

__all__ = ["main", "setup_logging", "version"]

LOG_FORMAT = "[%(asctime)s] %(levelname)s %(message)s (%(name)s)"  # Kafka's log4j layout
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def version() -> str:
    """kafkapy's version: the installed distribution's, else the one in the source tree's pyproject."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("kafkapy")
    except PackageNotFoundError:
        pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
        try:
            import tomllib

            return tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["version"]
        except (OSError, KeyError, ValueError):
            return "unknown"


def setup_logging(level: str) -> None:
    """One line per event on stderr, with a timestamp, level and logger name."""
    logging.basicConfig(level=getattr(logging, level.upper()), format=LOG_FORMAT, stream=sys.stderr, force=True)


def _parser(with_admin: bool = True, only_serve: bool = False) -> argparse.ArgumentParser:
    """The command line; `with_admin=False` leaves out the admin nouns (some 40 ms of argparse set-up
    that `kafkapy serve` does not need), `only_serve=True` every command but `serve`. argparse itself
    is imported here: `kafkapy serve` in its plain forms is parsed without it (`_plain_serve_args`)."""
    import argparse

    class _VersionAction(argparse.Action):
        """--version, with the version looked up only when asked for: importlib.metadata costs some
        20 ms that `kafkapy serve` would otherwise pay before its first request."""

        def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
            super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

        def __call__(self, parser, namespace, values, option_string=None):
            print(f"kafkapy {version()}")  # on stdout, as argparse's own version action
            parser.exit()

    class _Parser(argparse.ArgumentParser):
        """Usage errors as one line (and exit code 2), pointing at --help instead of printing the usage."""

        def error(self, message: str):
            self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--log-level", type=str.upper, choices=LOG_LEVELS, default=argparse.SUPPRESS,
                        help="logging level (default INFO)")
    parser = _Parser(prog="kafkapy", parents=[common],
                                     description="A Kafka-compatible broker written in Python.")
    parser.add_argument("--version", action=_VersionAction,
                        help="show program's version number and exit")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    serve = commands.add_parser("serve", parents=[common], help="run a broker",
                                description="Run a broker until SIGINT/SIGTERM.")
    serve.add_argument("--config", "-c", metavar="FILE", help="server.properties file (Kafka syntax)")
    serve.add_argument("config_file", nargs="?", metavar="FILE",
                       help="server.properties file, as kafka-server-start.sh takes it")
    serve.add_argument("--ephemeral", action="store_true",
                       help="a throwaway broker for tests: 127.0.0.1 on --port (default: a free one), data in a "
                            "temporary directory removed on exit; prints KAFKAPY_BOOTSTRAP=host:port on stdout "
                            "once it serves requests")
    serve.add_argument("--port", type=int, default=0, help="with --ephemeral: the port (0: a free one)")
    serve.add_argument("--control", action="store_true",
                       help="enable fault injection and its HTTP control endpoint on a free loopback port "
                            "(kafkapy.control.listener=127.0.0.1:0); prints KAFKAPY_CONTROL=http://host:port "
                            "before the KAFKAPY_BOOTSTRAP line (docs/testing.md)")
    serve.add_argument("--storage", choices=("disk", "memory"), default="disk",
                       help="with --ephemeral: keep the temporary data on disk (default) or on a memory file "
                            "system (tmpfs: /dev/shm or $KAFKAPY_MEMORY_DIR)")
    serve.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                       help="set a config, overriding the file (repeatable)")
    if only_serve:
        return parser
    cluster = commands.add_parser("cluster", parents=[common],
                                  help="run a local ZooKeeper-mode cluster; `cluster describe`: describe a cluster",
                                  description="Without a verb: run ZooKeeper and N brokers on 127.0.0.1 until "
                                              "SIGINT/SIGTERM, then stop the brokers and ZooKeeper. "
                                              "`kafkapy cluster describe -b HOST:PORT`: a running cluster's id, "
                                              "controller and brokers.")
    cluster.add_argument("--brokers", type=_positive_int, default=3, metavar="N", help="number of brokers (default 3)")
    cluster.add_argument("--dir", type=Path, default=Path("kafkapy-cluster"), metavar="DIR",
                         help="data and logs of ZooKeeper and the brokers (default ./kafkapy-cluster)")
    cluster.add_argument("--base-port", type=_port, default=9092, metavar="PORT",
                         help="broker N listens on PORT+N-1 (default 9092)")
    cluster.add_argument("--zookeeper", metavar="HOST:PORT[/CHROOT]",
                         help="use this ZooKeeper instead of starting one on a free port")
    cluster.add_argument("--override", action="append", type=_key_value, default=[], metavar="KEY=VALUE",
                         help="set a config on every broker (repeatable)")
    from .admin.commands import add_admin_commands, add_cluster_verbs  # argparse only: cheap to import

    add_cluster_verbs(cluster)
    if with_admin:
        add_admin_commands(commands)
        from .schemaregistry.cli import add_schemas_command  # argparse and urllib only

        add_schemas_command(commands)
        from .tables.cli import add_tables_command  # argparse only

        add_tables_command(commands)
    return parser


def _command_word(argv: list[str]) -> str | None:
    """The first word that is not an option (nor --log-level's value): the command."""
    skip = False
    for word in argv:
        if skip:
            skip = False
        elif word == "--log-level":
            skip = True
        elif not word.startswith("-"):
            return word
    return None


# The `kafkapy serve` options that take a value, and their attribute; every other option is a flag.
_SERVE_VALUE_OPTIONS = {"--config": "config", "-c": "config", "--port": "port", "--storage": "storage",
                        "--override": "override", "--log-level": "log_level"}
_SERVE_FLAGS = {"--ephemeral": "ephemeral", "--control": "control"}


def _plain_serve_args(argv: list[str]):
    """`kafkapy serve` argv in its plain forms (whole option names, `--opt value` or `--opt=value`,
    one positional config file), parsed as `_parser()` would parse it, without argparse: importing
    argparse (with gettext and locale) and building the parser cost about 5 ms of the start, before
    the first request. None for anything else (help, --version, abbreviations, bad values, ...):
    argparse then parses the line, with its usage errors and help."""
    from types import SimpleNamespace

    args = SimpleNamespace(command="serve", config=None, config_file=None, ephemeral=False, port=0,
                           control=False, storage="disk", override=[])
    words = iter(argv)
    seen_command = False
    for word in words:
        if not word.startswith("-"):
            if not seen_command and word == "serve":
                seen_command = True
            elif seen_command and args.config_file is None:
                args.config_file = word
            else:
                return None
            continue
        name, eq, value = word.partition("=")
        if name in _SERVE_FLAGS and not eq and seen_command:
            setattr(args, _SERVE_FLAGS[name], True)
            continue
        if name not in _SERVE_VALUE_OPTIONS or (not seen_command and name != "--log-level") or (
                eq and name == "-c"):
            return None
        if not eq:
            value = next(words, None)
            if value is None or value.startswith("-"):
                return None
        dest = _SERVE_VALUE_OPTIONS[name]
        if dest == "port":
            if not value.isdigit():
                return None
            args.port = int(value)
        elif dest == "storage":
            if value not in ("disk", "memory"):
                return None
            args.storage = value
        elif dest == "log_level":
            if value.upper() not in LOG_LEVELS:
                return None
            args.log_level = value.upper()
        elif dest == "override":
            args.override.append(value)
        else:
            args.config = value
    return args if seen_command else None


def _positive_int(text: str) -> int:
    import argparse

    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, not {text!r}")
    return int(text)


def _port(text: str) -> int:
    import argparse

    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"expected a TCP port (1-65535), not {text!r}")
    return int(text)


def _key_value(text: str) -> tuple[str, str]:
    import argparse

    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, not {text!r}")
    return key.strip(), value


def _serve(args: argparse.Namespace, gc_paused: tuple[int, int, int] | None = None) -> int:
    from .broker.config import BrokerConfig, ConfigError

    log = logging.getLogger("kafkapy")
    if args.config and args.config_file:
        print("kafkapy: give the config file either with --config or as an argument, not both", file=sys.stderr)
        return 2
    path = args.config or args.config_file
    overrides = list(args.override)
    if getattr(args, "control", False) and not any(
            item.partition("=")[0].strip() == "kafkapy.control.listener" for item in overrides):
        overrides.append("kafkapy.control.listener=127.0.0.1:0")
    temp_dir = None
    if args.ephemeral:
        listener = f"PLAINTEXT://127.0.0.1:{args.port}"
        given = {item.partition("=")[0].strip() for item in overrides}
        defaults = {"listeners": listener, "advertised.listeners": listener}
        if "log.dirs" not in given and "log.dir" not in given:
            from .testing.storage import MemoryStorageUnavailable, data_directory

            try:
                temp_dir = str(data_directory(args.storage, prefix="kafkapy-ephemeral-"))
            except MemoryStorageUnavailable as exc:
                print(f"kafkapy: {exc}", file=sys.stderr)
                return 2
            defaults["log.dirs"] = temp_dir
        overrides = [f"{key}={value}" for key, value in defaults.items() if key not in given] + overrides
    try:
        return _serve_config(args, path, overrides, log, gc_paused)
    finally:
        if temp_dir is not None:
            import shutil

            shutil.rmtree(temp_dir, ignore_errors=True)


def _serve_config(args: argparse.Namespace, path, overrides, log, gc_paused: tuple[int, int, int] | None = None) -> int:
    from .broker.config import BrokerConfig, ConfigError

    try:
        config = BrokerConfig.from_properties_file(path, overrides)
    except ConfigError as exc:
        print(f"kafkapy: invalid configuration: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"kafkapy: cannot read config file {path}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    from .node import run  # imported late: the CLI must load even where the server cannot

    control = config.get("kafkapy.control.listener")

    def announce(broker) -> None:
        _resume_gc(gc_paused)  # serving now: what the start built stays, out of the collector's way
        if control:  # fault injection and its control endpoint (broker/faults.py), announced first
            from .broker.faults import install

            print(f"KAFKAPY_CONTROL={install(broker).control.url}", flush=not args.ephemeral)
        if args.ephemeral:
            print(f"KAFKAPY_BOOTSTRAP=127.0.0.1:{broker.port}", flush=True)

    try:
        if args.ephemeral or control or gc_paused is not None:
            run(config, on_ready=announce)
        else:
            run(config)
    except KeyboardInterrupt:
        log.info("interrupted")
        return 130
    except ConfigError as exc:
        print(f"kafkapy: invalid configuration: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # the process is ending: log why, with the traceback, and exit non-zero
        from .broker.cluster_member import ClusterStartError

        if isinstance(exc, ClusterStartError):
            print(f"kafkapy: cannot join the cluster: {exc}", file=sys.stderr)
            return 1
        log.exception("kafkapy broker failed")
        return 1
    return 0


def _cluster(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.base_port + args.brokers - 1 > 65535:
        parser.error(f"--base-port {args.base_port} leaves no room for {args.brokers} brokers")
    from .devcluster.brokers import run_cluster

    return run_cluster(args.dir, brokers=args.brokers, base_port=args.base_port, overrides=dict(args.override),
                       zookeeper_connect=args.zookeeper)


# gen0 threshold while `kafkapy serve` starts: above what a start allocates, so no collection runs
# before the first answer, yet a start that waits long (a cluster member whose ZooKeeper is down)
# still collects now and then
_START_GC_THRESHOLD = 200_000


def _pause_gc() -> tuple[int, int, int] | None:
    """Next to no cyclic garbage collection while `kafkapy serve` starts: importing the broker
    allocates objects that live as long as the process, and the collector would scan them over and
    over (about 8 ms of the start here). Once the broker serves they are frozen (gc.freeze: later
    collections skip them) and the usual thresholds come back (`_resume_gc`). Only for the process's
    own command line: a caller of main() keeps its collector as it is. Returns the thresholds to
    restore."""
    import gc

    if not gc.isenabled():
        return None
    thresholds = gc.get_threshold()
    gc.set_threshold(_START_GC_THRESHOLD, thresholds[1], thresholds[2])
    return thresholds


def _resume_gc(thresholds: tuple[int, int, int] | None) -> None:
    if thresholds is not None:
        import gc

        gc.freeze()
        gc.set_threshold(*thresholds)


def _last_stable_offsets(bootstrap: str, topics: list[str]) -> dict[tuple[str, int], int]:
    """(topic, partition) -> last stable offset of `topics` (`kafkapy tables describe -b`)."""
    from .admin.client import AdminClient
    from .admin.offsets import list_offsets

    with AdminClient(bootstrap) as client:
        partitions = sorted(client.leaders(topics))
        return list_offsets(client, partitions, -1, isolation_level=1)


def main(argv: list[str] | None = None) -> int:
    own_process = argv is None  # the `kafkapy` command itself (not a caller passing its own argv)
    argv = sys.argv[1:] if argv is None else list(argv)
    serving = _command_word(argv) == "serve"
    gc_paused = _pause_gc() if serving and own_process else None
    args = _plain_serve_args(argv) if serving else None
    if args is None:
        parser = _parser(with_admin=not serving, only_serve=serving)
        args = parser.parse_args(argv)
    setup_logging(getattr(args, "log_level", "INFO"))
    if getattr(args, "admin_target", None):
        from .admin.commands import run_admin

        return run_admin(args)
    if getattr(args, "schemas_command", False):
        from .schemaregistry.cli import run_schemas

        return run_schemas(args)
    if getattr(args, "tables_command", False):
        from .tables.cli import run_tables

        return run_tables(args, _last_stable_offsets)
    if args.command == "serve":
        return _serve(args, gc_paused)
    if args.command == "cluster":
        return _cluster(parser, args)
    parser.print_help(sys.stderr)
    return 2
