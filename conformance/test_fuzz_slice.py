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
