"""Property tests: every generated (message, version) decodes what it encodes."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from test_codec_values import all_message_versions, case_id, message_strategy

CASES = all_message_versions()

# ~550 cases: few examples each keeps the whole suite to a few tens of seconds.
FAST = settings(max_examples=12, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_round_trip(case):
    cls, version = case

    @FAST
    @given(message=message_strategy(cls, version), prefix=st.binary(max_size=3))
    def round_trip(message, prefix):
        encoded = message.encode(version)
        assert isinstance(encoded, bytes)
        decoded = cls.decode(encoded, version)
        assert decoded == message
        assert decoded.encode(version) == encoded
        # decoding from an offset, from a memoryview, and with trailing bytes
        framed = prefix + encoded + b"\x00trailing"
        assert cls.decode(memoryview(framed), version, len(prefix)) == message

    round_trip()
