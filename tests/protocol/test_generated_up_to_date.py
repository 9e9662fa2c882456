"""The committed kafkapy/protocol/messages package and error_codes.py match the generator's output."""
from __future__ import annotations

import filecmp
import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SPEC_DIR = REPO.parent / "shared" / "kafka-protocol-3.9"
PROTOCOL = REPO / "kafkapy" / "protocol"


def _load_generator():
    spec = importlib.util.spec_from_file_location("genprotocol", REPO / "tools" / "genprotocol.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["genprotocol"] = module   # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not SPEC_DIR.is_dir(), reason="../shared/kafka-protocol-3.9 is not present")
def test_generated_code_is_up_to_date(tmp_path):
    _load_generator().generate(SPEC_DIR, tmp_path)
    fresh = {p.relative_to(tmp_path) for p in tmp_path.rglob("*.py")}
    committed = {p.relative_to(PROTOCOL) for p in (PROTOCOL / "messages").rglob("*.py")}
    committed.add(Path("error_codes.py"))
    assert fresh == committed, "regenerate with: python tools/genprotocol.py"
    stale = [str(p) for p in sorted(fresh)
             if not filecmp.cmp(tmp_path / p, PROTOCOL / p, shallow=False)]
    assert not stale, f"out of date (run python tools/genprotocol.py): {stale}"


def test_struct_name_clash_is_disambiguated(tmp_path):
    """Kafka's 3.9 specs have no clash, but the generator must not silently merge two structs."""
    import json
    gen = _load_generator()
    spec = {
        "apiKey": 999, "type": "request", "name": "ClashRequest", "validVersions": "0-1",
        "flexibleVersions": "1+",
        "fields": [
            {"name": "Left", "type": "[]Item", "versions": "0+",
             "fields": [{"name": "A", "type": "int32", "versions": "0+"}]},
            {"name": "Right", "type": "[]Item", "versions": "0+",
             "fields": [{"name": "B", "type": "string", "versions": "0+"}]},
            {"name": "Again", "type": "[]Item", "versions": "0+",
             "fields": [{"name": "A", "type": "int32", "versions": "0+"}]},
        ],
    }
    path = tmp_path / "ClashRequest.json"
    path.write_text(json.dumps(spec))
    msg = gen.load_message(path)
    names = [s.name for s in msg.structs]
    assert names == ["Item", "ItemRight"]
    assert msg.root.fields[2].struct is msg.root.fields[0].struct
    classes, codecs = gen.ModuleBuilder("Clash", 999, [msg, msg]).render()
    compile(classes, "clash.py", "exec")
    compile(codecs, "codecs/clash.py", "exec")
    assert "struct Right.Item is named ItemRight" in classes
    assert "_ClashRequest_ItemRight" in codecs
