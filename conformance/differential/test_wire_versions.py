"""Per-version wire differential in CI (issue 30): every request version kafkapy answers, against real Kafka.

kafkapy (one process) and each reference (conformance/real_kafka.py: Kafka 4.4.0 in KRaft mode, Kafka
3.9.1 in ZooKeeper mode, one JVM at a time) are set up alike (topics `wire` and `wire-secret`, records, a
committed offset, a committed transaction, ACLs under an authorizer); then every read-only request of
conformance/differential/wire_versions.py, at every version both brokers advertise, goes to both as the
same bytes, and both answers are decoded with kafkapy's codecs and compared after normalization.

Any difference that wire_known_differences.py does not list fails; each listed kafkapy defect is its
own strict xfail (a fix makes it XPASS: then move the entry out of DEFECTS). About 25 s for both
references on the 2-core machine (the JVMs start in 2-4 s). Without java or the Maven jars the tests
skip loudly (fail under KAFKAPY_REQUIRE_JAVA=1).
"""
from __future__ import annotations

import os

import pytest

from conformance.differential.runner import kafkapy_target, reference_broker
from conformance.differential.wire_known_differences import ACCEPTED, DEFECTS, classify
from conformance.differential.wire_versions import Run, prepare_broker, run_against
from conformance.real_kafka import RealKafkaUnavailable

REQUIRE_ENV = "KAFKAPY_REQUIRE_JAVA"
REFERENCES = ("kafka-4.4.0-kraft", "kafka-3.9.1-zk")
# APIs each comparison must have covered at some version (both brokers advertise them).
EXPECTED_APIS = {
    "kafka-4.4.0-kraft": {"ApiVersions", "Metadata", "DescribeCluster", "FindCoordinator", "ListOffsets", "Fetch",
                          "OffsetFetch", "DescribeGroups", "ListGroups", "DescribeConfigs", "DescribeAcls",
                          "DescribeLogDirs", "DescribeProducers", "DescribeTransactions", "ListTransactions",
                          "DescribeClientQuotas", "DescribeUserScramCredentials", "DescribeTopicPartitions",
                          "ConsumerGroupDescribe", "ShareGroupDescribe", "CreateTopics"},
    "kafka-3.9.1-zk": {"ApiVersions", "Metadata", "DescribeCluster", "FindCoordinator", "ListOffsets", "Fetch",
                       "OffsetFetch", "DescribeGroups", "ListGroups", "DescribeConfigs", "DescribeAcls",
                       "DescribeLogDirs", "DescribeProducers", "DescribeTransactions", "ListTransactions",
                       "DescribeClientQuotas", "DescribeUserScramCredentials", "ConsumerGroupDescribe",
                       "CreateTopics"},
}

pytestmark = pytest.mark.timeout(240)


def _unavailable(reason: str) -> None:
    message = f"!!! wire differential NOT RUN: {reason}"
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{message} ({REQUIRE_ENV}=1)", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="module")
def kafkapy(tmp_path_factory):
    """A prepared kafkapy broker: (bootstrap, context)."""
    try:
        import confluent_kafka  # noqa: F401 - the set-up's client
    except ImportError as exc:
        _unavailable(f"confluent-kafka not installed ({exc})")
    with kafkapy_target(tmp_path_factory.mktemp("kafkapy"), {}) as broker:
        yield broker.bootstrap, prepare_broker(broker.bootstrap, authorizer=True)


@pytest.fixture(scope="module")
def runs(kafkapy, tmp_path_factory):
    """reference name -> its Run (or why it could not run), each reference started once, on first use."""
    cache: dict[str, Run | str] = {}

    def get(reference: str) -> Run:
        if reference not in cache:
            try:
                with reference_broker(reference, tmp_path_factory.mktemp(reference), {}) as real:
                    ctx = prepare_broker(real.bootstrap, authorizer=True)
                    cache[reference] = run_against(kafkapy[0], kafkapy[1], reference, real.bootstrap, ctx)
            except RealKafkaUnavailable as exc:
                cache[reference] = str(exc)
        result = cache[reference]
        if isinstance(result, str):
            _unavailable(result)
        return result

    return get


def _lines(diffs) -> str:
    return "\n".join(f"  {d}" for d in diffs)


@pytest.mark.parametrize("reference", REFERENCES)
def test_every_answer_as_real_kafka(reference: str, runs) -> None:
    """Every answer of every version both brokers advertise is Kafka's, bar the listed differences."""
    run = runs(reference)
    missing = EXPECTED_APIS[reference] - set(run.versions)
    assert not missing, f"not compared against {reference}: {sorted(missing)} (versions: {run.versions})"
    assert run.compared >= 300, run.compared
    unexplained = [d for d in run.differences if classify(d)[0] == "unexplained"]
    assert not unexplained, (f"kafkapy answers differently from {reference} ({run.compared} answers compared); "
                             f"fix kafkapy, or list the difference in wire_known_differences.py:\n{_lines(unexplained)}")


@pytest.mark.parametrize("reference", REFERENCES)
def test_accepted_differences_still_occur(reference: str, runs) -> None:
    """An accepted difference for one reference that no longer occurs is a stale entry."""
    run = runs(reference)
    stale = [entry for entry in ACCEPTED
             if entry.reference == reference and not any(entry.matches(d) for d in run.differences)]
    assert not stale, "remove from ACCEPTED:\n" + "\n".join(f"  {e}" for e in stale)


# one strict xfail per known defect; none are open now (the test is defined again once one is listed)
if DEFECTS:
    @pytest.mark.parametrize("reference, defect", [
        pytest.param(reference, defect, id=f"{reference}-{defect.name}",
                     marks=pytest.mark.xfail(strict=True, reason=defect.reason))
        for reference in REFERENCES for defect in DEFECTS if defect.reference in ("*", reference)])
    def test_known_defect(reference: str, defect, runs) -> None:
        """A kafkapy defect the differential found; passes (XPASS, failing the strict xfail) once fixed."""
        run = runs(reference)
        hits = [d for d in run.differences if defect.matches(d)]
        assert not hits, f"{defect.reason}\n{_lines(hits[:8])}"
