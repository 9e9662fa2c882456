"""The `kafkapy` command line: `kafkapy serve [--config server.properties] [--override key=value ...]`."""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

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


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--log-level", type=str.upper, choices=LOG_LEVELS, default=argparse.SUPPRESS,
                        help="logging level (default INFO)")
    parser = argparse.ArgumentParser(prog="kafkapy", parents=[common],
                                     description="A Kafka-compatible broker written in Python.")
    parser.add_argument("--version", action="version", version=f"kafkapy {version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    serve = commands.add_parser("serve", parents=[common], help="run a broker",
                                description="Run a broker until SIGINT/SIGTERM.")
    serve.add_argument("--config", "-c", metavar="FILE", help="server.properties file (Kafka syntax)")
    serve.add_argument("config_file", nargs="?", metavar="FILE",
                       help="server.properties file, as kafka-server-start.sh takes it")
    serve.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                       help="set a config, overriding the file (repeatable)")
    return parser


def _serve(args: argparse.Namespace) -> int:
    from .broker.config import BrokerConfig, ConfigError

    log = logging.getLogger("kafkapy")
    if args.config and args.config_file:
        print("kafkapy: give the config file either with --config or as an argument, not both", file=sys.stderr)
        return 2
    path = args.config or args.config_file
    try:
        config = BrokerConfig.from_properties_file(path, args.override)
    except ConfigError as exc:
        print(f"kafkapy: invalid configuration: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"kafkapy: cannot read config file {path}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    from .broker.server import run  # imported late: the CLI must load even where the server cannot

    try:
        run(config)
    except KeyboardInterrupt:
        log.info("interrupted")
        return 130
    except ConfigError as exc:
        print(f"kafkapy: invalid configuration: {exc}", file=sys.stderr)
        return 1
    except Exception:  # the process is ending: log why, with the traceback, and exit non-zero
        log.exception("kafkapy broker failed")
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    setup_logging(getattr(args, "log_level", "INFO"))
    if args.command == "serve":
        return _serve(args)
    parser.print_help(sys.stderr)
    return 2
