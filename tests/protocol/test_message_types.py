"""The messages package imports an API's module on first use, and its tables still see every API."""
from __future__ import annotations

import subprocess
import sys

from kafkapy.protocol.messages import REQUEST_TYPES, RESPONSE_TYPES

_FIRST_USE = """
import sys
import kafkapy.protocol.messages as messages
from kafkapy.protocol.messages import REQUEST_TYPES
loaded = lambda: sorted(m.rsplit(".", 1)[1] for m in sys.modules if m.startswith("kafkapy.protocol.messages."))
print(loaded())
REQUEST_TYPES[18]
print(loaded())
from kafkapy.protocol.messages import ProduceResponse
print(loaded(), 0 in REQUEST_TYPES, len(REQUEST_TYPES), REQUEST_TYPES.class_names()[1], loaded() == ["api_versions", "produce"])
"""


def test_a_module_is_imported_on_first_use_only():
    out = subprocess.run([sys.executable, "-c", _FIRST_USE], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out[0] == "[]"
    assert out[1] == "['api_versions']"
    # 3.9's 78, Describe/Alter/DeleteShareGroupOffsets and StreamsGroupHeartbeat/Describe
    assert out[2].endswith("True 83 FetchRequest True")


def test_the_tables_see_every_api_in_api_key_order():
    keys = list(REQUEST_TYPES)
    assert keys == sorted(keys) and keys == list(RESPONSE_TYPES)
    assert [key for key, _ in REQUEST_TYPES.items()] == keys
    assert all(cls.API_KEY == key for key, cls in RESPONSE_TYPES.items())
    assert REQUEST_TYPES.get(52) is None and 52 not in REQUEST_TYPES
    assert REQUEST_TYPES.class_names()[18] == "ApiVersionsRequest"
