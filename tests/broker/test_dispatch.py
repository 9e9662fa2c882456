"""The dispatch table: handler modules imported on first request, and the table of which module serves which key."""
from __future__ import annotations

import asyncio
import importlib
import pkgutil
import subprocess
import sys

import pytest

from kafkapy.broker import handlers
from kafkapy.broker.dispatch import HANDLERS, RequestContext
from kafkapy.broker.handlers import HANDLER_MODULES
from kafkapy.protocol.api_versions import CLUSTER_VERSIONS, SUPPORTED_VERSIONS


def _registrations() -> dict[int, str]:
    """api key -> module of the handler each handler module registers, all of them imported."""
    for info in pkgutil.iter_modules(handlers.__path__):
        importlib.import_module(f"{handlers.__name__}.{info.name}")
    return {key: fn.__module__.rpartition(".")[2] for key, fn in HANDLERS.items()}


def test_handler_modules_table_matches_the_registrations():
    assert _registrations() == HANDLER_MODULES


def test_every_advertised_api_has_a_handler_without_importing_it():
    # Broker.advertised_versions keeps the keys in HANDLERS: every one must be there from the start
    assert (SUPPORTED_VERSIONS.keys() | CLUSTER_VERSIONS.keys()) <= HANDLER_MODULES.keys()


_FIRST_REQUEST = """
import asyncio, sys, types
import kafkapy.broker.broker
from kafkapy.broker.dispatch import HANDLERS, RequestContext
from kafkapy.protocol.messages import ApiVersionsRequest
loaded = lambda: sorted(m for m in sys.modules if m.startswith("kafkapy.broker.handlers."))
print(loaded())
stand_in = HANDLERS[18]
broker = types.SimpleNamespace(advertised_versions={18: (0, 4)})
response = asyncio.run(stand_in(RequestContext(services=broker, connection=None), ApiVersionsRequest()))
print(response.api_keys[0].api_key, HANDLERS[18].__name__, loaded())
"""


def test_a_handler_module_is_imported_on_its_first_request():
    out = subprocess.run([sys.executable, "-c", _FIRST_REQUEST], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert "kafkapy.broker.handlers.produce" not in out[0]
    assert "kafkapy.broker.handlers.api_versions" not in out[0]
    key, name, loaded = out[1].split(" ", 2)
    assert (key, name) == ("18", "handle_api_versions")
    assert "kafkapy.broker.handlers.api_versions" in loaded


def test_a_module_that_does_not_register_its_key_fails_instead_of_looping():
    from kafkapy.broker import dispatch

    stand_in = dispatch._import_on_first_request(999, "api_versions")  # registers 18, not 999
    HANDLERS[999] = stand_in
    try:
        with pytest.raises(RuntimeError, match="registers no handler for api key 999"):
            asyncio.run(stand_in(RequestContext(services=None, connection=None), None))
    finally:
        del HANDLERS[999]
