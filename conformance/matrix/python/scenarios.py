"""The client matrix's Python program: one client library runs the scenario contract.

    python scenarios.py CLIENT BOOTSTRAP PREFIX

CLIENT is kafka-python (api_version negotiated), kafka-python-0.10 / -1.0 / -2.0 (api_version
pinned), aiokafka or confluent-kafka (whichever version the interpreter running this file has: the
old-confluent-kafka cell runs it with a throwaway venv's python). Prints one JSON object per
scenario on stdout, in the contract's order (conformance/matrix/README.md); logs go to stderr.
Only the standard library and the client library are imported, so any venv can run it.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scenario_base import CODECS, SCENARIOS, ScenarioResult, Unsupported  # noqa: E402

SCENARIO_TIMEOUT_S = float(os.environ.get("MATRIX_SCENARIO_TIMEOUT_S", "20"))


def _client(name: str, bootstrap: str, prefix: str) -> Any:
    if name.startswith("kafka-python"):
        from kafka_python_client import KafkaPythonClient

        pinned = {"kafka-python": None, "kafka-python-0.10": (0, 10), "kafka-python-1.0": (1, 0),
                  "kafka-python-2.0": (2, 0)}
        if name not in pinned:
            raise SystemExit(f"unknown kafka-python cell {name!r}")
        return KafkaPythonClient(bootstrap, prefix, pinned[name])
    if name == "aiokafka":
        from aiokafka_client import AiokafkaClient

        return AiokafkaClient(bootstrap, prefix)
    if name == "confluent-kafka":
        from confluent_client import ConfluentClient

        return ConfluentClient(bootstrap, prefix)
    raise SystemExit(f"unknown client {name!r}")


def _run_bounded(call: Callable[[], dict[str, Any]], name: str) -> ScenarioResult:
    """Run one scenario in a daemon thread so a hung client call cannot stop the next scenarios."""
    box: list[ScenarioResult] = []

    def target() -> None:
        try:
            box.append(ScenarioResult(name, "pass", call()))
        except Unsupported as exc:
            box.append(ScenarioResult(name, "unsupported", {}, str(exc)))
        except Exception as exc:  # noqa: BLE001 - the contract reports every failure as a line
            logging.exception("scenario %s failed", name)
            box.append(ScenarioResult(name, "fail", {}, f"{type(exc).__name__}: {exc}"))

    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    thread.join(SCENARIO_TIMEOUT_S)
    if not box:
        return ScenarioResult(name, "fail", {}, f"timeout: not finished within {SCENARIO_TIMEOUT_S:.0f} s")
    return box[0]


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    _, client_name, bootstrap, prefix = argv
    only = set(filter(None, os.environ.get("MATRIX_SCENARIOS", "").split(",")))
    client = _client(client_name, bootstrap, prefix)
    for scenario in SCENARIOS:
        if only and scenario not in only:
            continue
        if scenario.startswith("produce_"):
            codec = scenario.removeprefix("produce_")
            assert codec in CODECS
            call = lambda codec=codec: client.produce(codec)  # noqa: E731
        else:
            call = getattr(client, scenario)
        result = _run_bounded(call, scenario)
        sys.stdout.write(json.dumps(result.as_json(), sort_keys=True) + "\n")
        sys.stdout.flush()
    sys.stdout.flush()
    sys.stderr.flush()
    # A timed-out scenario leaves a client thread behind; do not wait for it.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
