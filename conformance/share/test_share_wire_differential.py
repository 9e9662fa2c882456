"""Stale sessions and epochs of share groups, at the wire, against Apache Kafka 4.4.0 (issue 31).

wire_scenarios.observe sends the same raw requests (kafkapy's codecs over plain sockets) to a
broker: ShareGroupHeartbeat of an unknown group, an empty member id, a join without topics, the
previous, an older and a greater member epoch, a full request, a rejoin with epoch 0, a second
leave; ShareFetch with no session, a skipped or repeated session epoch, epoch 0 with
acknowledgements and on an existing session, a partition not assigned, a member that never
joined, a member that left or was expired by the group coordinator, a closed session; and
ShareAcknowledge of offsets never acquired, past the last delivered, held by another member,
acknowledged already, after their lock expired, in bad batches, on an unknown or closed session.
Each answer is kept with every field a client reads (top-level and per-partition codes and
messages, member epochs relative to the first assigned one, assignments, acquired ranges).

kafka_4_4_wire_answers.json holds what Kafka 4.4.0 (KRaft, single node) answered. kafkapy must
answer the same, but for KNOWN_DIFFERENCES (each with its reason, and kafkapy's own answer pinned);
the second test runs the scenarios against Kafka 4.4.0 itself and compares with the file, so a
change in Kafka shows up here. Without Java or the Maven artifacts it skips loudly (and fails
under KAFKAPY_REQUIRE_JAVA=1). About 6 s against kafkapy, 15-25 s against Kafka (its start and a
3 s member expiry included).

Re-record the file (after checking why Kafka's answers changed):
    python -m conformance.share.test_share_wire_differential
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conformance.share.wire_scenarios import BROKER_SETTINGS, observe

pytestmark = pytest.mark.timeout(90)

HERE = Path(__file__).resolve().parent
ANSWERS = HERE / "kafka_4_4_wire_answers.json"
REQUIRE_ENV = "KAFKAPY_REQUIRE_JAVA"
REFERENCE = "kafka-4.4.0-kraft"

_ASYNC_INIT = (
    "Kafka 4.4 assigns a share-partition only once its share state is initialized "
    "(InitializeShareGroupState, started after the join's answer): the join answers epoch 2 with "
    "nothing assigned and the next heartbeat epoch 3 with the partition. kafkapy initializes the "
    "state within the heartbeat and assigns at once: epoch 2 with the partition (both start a "
    "group at epoch 1, as Kafka's ModernGroup does)")

# step -> (kafkapy's answer, why it differs from Kafka 4.4.0's)
KNOWN_DIFFERENCES: dict[str, tuple[object, str]] = {
    "fetch.not_assigned_partition.U": (
        [],
        "Kafka 4.4 answers a share-partition whose share state the group never initialized (a topic no "
        "member subscribes to) with UNKNOWN_SERVER_ERROR once it tried to load it, or leaves it out of the "
        "answer while it loads (both seen); kafkapy serves it like any other (nothing here: T-0 took the "
        "MaxRecords)"),
    "hb.unknown_group": (
        {"error": 25, "message": "Member A is not a member of group G."},
        "Kafka keeps share groups in __consumer_offsets and answers GROUP_ID_NOT_FOUND for one it never "
        "saw; kafkapy does not store members, so a group unknown to it may be one a restarted or moved "
        "coordinator lost, and UNKNOWN_MEMBER_ID makes its members join again (librdkafka stops a member "
        "on GROUP_ID_NOT_FOUND)"),
    "hb.join": ({"error": 0, "message": None, "epoch": 2, "assignment": [["T-ID", [0]]]}, _ASYNC_INIT),
    "hb.steady": ({"error": 0, "message": None, "epoch": 2, "assignment": [["T-ID", [0]]]}, _ASYNC_INIT),
    "left.fetch_after_leave": (
        {"error": 0, "message": None, "partitions": [["T-ID", 0, 0, None, 0, None, [[6, 6, 2]]]]},
        "records released together (a member's session closing) come back together in Kafka, as the "
        "in-flight batch they were acquired in, past MaxRecords (1 here); kafkapy acquires them again "
        "log batch by log batch within MaxRecords (docs/share-groups.md, differences)"),
}


VARYING = "fetch.not_assigned_partition.U"   # [] or a partition error (UNKNOWN_SERVER_ERROR seen), no records


def _expected() -> dict:
    return json.loads(ANSWERS.read_text())


@pytest.fixture(scope="module")
def broker_overrides() -> dict[str, str]:
    from conformance.real_kafka import base_properties

    props = base_properties("kraft", authorizer=False)
    props.update(BROKER_SETTINGS)
    return props


def test_kafkapy_answers_stale_sessions_and_epochs_as_kafka_4_4(broker):
    observed = observe(broker.bootstrap)
    expected = _expected()
    different = []
    for step in sorted(set(expected) | set(observed)):
        ours = observed.get(step, "<absent>")
        if step in KNOWN_DIFFERENCES:
            pinned, _ = KNOWN_DIFFERENCES[step]
            if ours != pinned:
                different.append(f"{step} (a known difference): kafkapy now {ours}, was {pinned}")
            continue
        if ours != expected.get(step, "<absent>"):
            different.append(f"{step}:\n  kafkapy    {json.dumps(ours)}\n  Kafka 4.4  {json.dumps(expected.get(step))}")
    assert not different, "\n".join(different)


def _unavailable(reason: str) -> None:
    message = f"!!! Kafka 4.4.0 share wire differential NOT RUN: {reason}"
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{message} ({REQUIRE_ENV}=1)", pytrace=False)
    pytest.skip(message)


def _observe_kafka(work_dir: Path) -> dict:
    from conformance.real_kafka import REFERENCES, RealKafka, RealKafkaUnavailable

    kafka = RealKafka(REFERENCES[REFERENCE], work_dir, BROKER_SETTINGS, authorizer=False)
    try:
        try:
            kafka.start()
        except RealKafkaUnavailable as exc:
            _unavailable(str(exc))
        return observe(kafka.bootstrap)
    finally:
        kafka.stop()   # ends the JVM, even after a failed start


def test_kafka_4_4_answers_what_the_file_says(tmp_path: Path):
    observed = _observe_kafka(tmp_path / "kafka")
    expected = _expected()
    # Kafka leaves the uninitialized share-partition out while it loads, or answers it UNKNOWN_SERVER_ERROR
    varying = observed.get(VARYING)
    if isinstance(varying, list) and all(p[2] != 0 and not p[6] for p in varying):
        observed[VARYING] = expected.get(VARYING)
    different = [f"{step}:\n  now   {json.dumps(observed.get(step))}\n  file  {json.dumps(expected.get(step))}"
                 for step in sorted(set(expected) | set(observed)) if observed.get(step) != expected.get(step)]
    assert not different, "Kafka 4.4.0 answers differently than recorded:\n" + "\n".join(different)


if __name__ == "__main__":
    import tempfile

    answers = _observe_kafka(Path(tempfile.mkdtemp(prefix="share-wire-kafka-")))
    ANSWERS.write_text(json.dumps(answers, indent=1) + "\n")
    print(f"wrote {len(answers)} answers to {ANSWERS}")
