"""A CI-sized slice of the fuzz campaign (bench/fuzz/campaign.py) against a real kafkapy process.

15,000 mutated requests across every advertised API and version (seeded from real clients' requests,
schema-built odd values, nulls, damaged headers) over 16 connections: the broker never exits, answers
ApiVersions and Metadata on a fresh connection every 1,500 requests, and logs no ERROR line or
traceback. The full campaign (1,000,000 requests) and its results: docs/fuzzing.md.
"""
from __future__ import annotations

import asyncio
import importlib.util
import sys
import time
from pathlib import Path

import pytest

from conformance.broker_process import start_broker

pytestmark = pytest.mark.timeout(120)

CAMPAIGN = Path(__file__).resolve().parent.parent / "bench" / "fuzz" / "campaign.py"


def load_campaign():
    spec = importlib.util.spec_from_file_location("kafkapy_fuzz_campaign", CAMPAIGN)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module     # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_fuzz_slice_no_crash_no_error_lines():
    campaign = load_campaign()
    with start_broker() as broker:
        summary = asyncio.run(campaign.run_campaign(
            broker.host, broker.port, requests=15_000, connections=16, seed=15, wait=1.0,
            check_every=1_500, broker=broker, log_path=broker.log_path))
        assert broker.is_running(), broker.stderr_tail()
    result = summary.as_dict()
    print({k: result[k] for k in ("requests", "seconds", "requests_per_second", "warning_lines", "by_generator")})
    assert summary.requests == 15_000
    assert summary.crashes == 0
    assert summary.liveness_failures == 0, summary.suspects[:5]
    assert (summary.error_lines, summary.traceback_count) == (0, 0), summary.error_samples
    # every generator ran and the broker answered (not only closed) a good share of what it got
    assert set(result["by_generator"]) == {"seed", "schema", "null", "header"}
    answered = sum(c.get("answered", 0) for c in result["by_generator"].values())
    assert answered > 4_000, result["by_generator"]


def test_join_group_naming_a_protocol_twice():
    """Found by the campaign: a JoinGroup listing the same protocol name twice counted it twice, so no
    protocol was supported by every member and the join timer raised ValueError (an ERROR traceback,
    the member never answered). Kafka counts each name once per member (MemberMetadata.protocols is a
    set): the member joins with that protocol."""
    from conformance.request_fuzzer import WireClient, encode_request, response_body
    from kafkapy.protocol.messages import FindCoordinatorRequest, JoinGroupRequest

    protocols = [JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x01"),
                 JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x02")]

    async def join(port: int):
        client = WireClient("127.0.0.1", port)
        try:
            find = FindCoordinatorRequest(key="dup-protocols", key_type=0)
            await client.exchange(encode_request(find, 1, 2), 2, 15.0)   # creates __consumer_offsets
            request = JoinGroupRequest(group_id="dup-protocols", session_timeout_ms=10_000,
                                       rebalance_timeout_ms=1_000, member_id="", protocol_type="consumer",
                                       protocols=protocols)
            outcome, payload = await client.exchange(encode_request(request, 4, 1), 1, 15.0)
            assert outcome == "answered"
            response = response_body(request.API_KEY, 4, payload)
            if response.error_code == 79:   # MEMBER_ID_REQUIRED (KIP-394): join again with the id
                request.member_id = response.member_id
                outcome, payload = await client.exchange(encode_request(request, 4, 3), 3, 15.0)
                assert outcome == "answered"
                response = response_body(request.API_KEY, 4, payload)
            return response
        finally:
            await client.close()

    with start_broker(overrides={"group.initial.rebalance.delay.ms": "0"}) as broker:
        for _ in range(40):   # until __consumer_offsets exists and its coordinator has loaded
            response = asyncio.run(join(broker.port))
            if response.error_code not in (14, 15, 16):   # LOAD_IN_PROGRESS, NOT_AVAILABLE, NOT_COORDINATOR
                break
            time.sleep(0.25)
        assert (response.error_code, response.protocol_name) == (0, "range")
        assert broker.is_running()
        log_text = broker.log_path.read_text(errors="replace")
        assert " ERROR " not in log_text and "Traceback" not in log_text, log_text[-3000:]
