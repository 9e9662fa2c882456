"""Streams group exchanges on the wire, kafkapy next to Kafka 4.4.0 (the reference, from Maven).

conformance/streams_groups_probe.py runs the same raw StreamsGroupHeartbeat/Describe scenario on
both: internal topics missing then created, a second member waiting for the revocation, Kafka's
errors for bad input (epochs, unknown tasks, a contradicting topology, internal topics, regexes,
changelog partition counts), a stale topology epoch, describe, leaving, and a group-level initial
rebalance delay. What a client sees must be the same, but for the differences listed here.
"""
from __future__ import annotations

import json
import re

import pytest

from conformance.kafka_apps.kafka_jars import unavailable
from conformance.real_kafka import REFERENCES, RealKafka, RealKafkaStartError, RealKafkaUnavailable
from conformance.streams_groups_probe import (
    PROBE_BROKER_CONFIG, initial_delay_probe, probe, response_fields_probe, standby_probe,
    topics_and_admin_probe)

pytestmark = pytest.mark.timeout(300)

# key -> why kafkapy differs
KNOWN_DIFFERENCES = {
    "m1 until stable": "Kafka creates the internal topics asynchronously (one more heartbeat with "
                       "MISSING_INTERNAL_TOPICS); kafkapy creates them before answering the first one",
}


def _normalized(seen: dict) -> dict:
    text = json.dumps(seen, sort_keys=True, default=str)
    return json.loads(re.sub(r"probe-(in|app|delay)-[0-9a-f]{6}", r"probe-\1-X", text))


def test_streams_group_exchanges_match_kafka(tmp_path, broker_factory):
    try:
        with RealKafka(REFERENCES["kafka-4.4.0-kraft"], tmp_path / "kafka", PROBE_BROKER_CONFIG) as kafka:
            reference = {"probe": probe(kafka.bootstrap), "delay": initial_delay_probe(kafka.bootstrap),
                         "admin": topics_and_admin_probe(kafka.bootstrap),
                         "fields": response_fields_probe(kafka.bootstrap), "standby": standby_probe(kafka.bootstrap)}
    except RealKafkaUnavailable as exc:
        unavailable(f"Kafka 4.4.0: {exc}")
    except RealKafkaStartError as exc:
        pytest.fail(str(exc), pytrace=False)
    ours_broker = broker_factory(PROBE_BROKER_CONFIG)
    ours = {"probe": probe(ours_broker.bootstrap), "delay": initial_delay_probe(ours_broker.bootstrap),
            "admin": topics_and_admin_probe(ours_broker.bootstrap),
            "fields": response_fields_probe(ours_broker.bootstrap), "standby": standby_probe(ours_broker.bootstrap)}
    reference, ours = _normalized(reference), _normalized(ours)
    # the known difference: both end with the tasks, kafkapy without the extra MISSING_INTERNAL_TOPICS step
    ref_steps, our_steps = reference["probe"].pop("m1 until stable"), ours["probe"].pop("m1 until stable")
    assert ref_steps[-1] == our_steps[-1]
    assert all(step["status"] in ([], [3]) for step in ref_steps + our_steps)
    differences = {}
    for part in ("probe", "delay", "admin", "fields", "standby"):
        for key in reference[part].keys() | ours[part].keys():
            if reference[part].get(key) != ours[part].get(key):
                differences[f"{part}/{key}"] = (reference[part].get(key), ours[part].get(key))
    assert not differences, "\n".join(f"{key}:\n  kafka-4.4: {ref}\n  kafkapy:   {got}"
                                       for key, (ref, got) in sorted(differences.items()))
