"""Replication throttles: the quota's sampled rate, the throttled-replicas lists (parsing and
Kafka's validation) and the decisions the leader path and the fetchers ask for."""
from __future__ import annotations

import re
import uuid
from types import MappingProxyType

import pytest
from hypothesis import given, settings, strategies as st

from kafkapy.broker.config import BrokerConfig, validate_topic_configs
from kafkapy.broker.config_defs import TOPIC_CONFIGS, parse_value
from kafkapy.metadata.errors import ConfigError, InvalidRequestError
from kafkapy.metadata.store import PartitionMetadata, TopicMetadata
from kafkapy.replication.throttle import (
    ALL_REPLICAS,
    UNLIMITED,
    ReplicationQuota,
    ReplicationThrottle,
    SampledRate,
    parse_throttled_replicas,
    valid_throttled_replicas,
)

# ---------------------------------------------------------------------- SampledRate


def test_rate_is_bytes_over_the_time_since_the_oldest_window_began_at_least_one_window():
    rate = SampledRate(samples=11, window_ms=1000)
    assert rate.measure(0) == 0.0
    rate.record(1000, 0)
    assert rate.measure(0) == 1000.0  # one window at least
    assert rate.measure(999) == 1000.0
    assert rate.measure(2000) == 500.0
    rate.record(1000, 2500)  # a second window, begun at 2500
    assert rate.measure(4000) == 500.0  # 2000 bytes over 4 s
    assert rate.measure(10_999) == pytest.approx(2000 * 1000 / 10_999)
    # 11 windows after it began, the first window is forgotten (reset to begin now)
    assert rate.measure(11_000) == pytest.approx(1000 * 1000 / (11_000 - 2500))
    assert rate.measure(13_500) == 0.0


def test_a_window_is_reused_after_samples_windows():
    rate = SampledRate(samples=2, window_ms=100)
    rate.record(10, 0)
    rate.record(20, 100)  # second window
    rate.record(40, 200)  # reuses the first: the 10 is gone
    assert rate.measure(200) == pytest.approx(60 * 1000 / 100)


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError):
        SampledRate(0, 1000)
    with pytest.raises(ValueError):
        SampledRate(11, 0)


# records as (gap before it in ms, value); times only move forward, as with a monotonic clock
records_strategy = st.lists(st.tuples(st.integers(0, 2500), st.integers(0, 10**6)), max_size=60)


@settings(max_examples=300, deadline=None)
@given(samples=st.integers(1, 12), window_ms=st.integers(1, 2000), records=records_strategy,
       later=st.integers(0, 30_000))
def test_rate_is_bounded_by_what_was_recorded_recently(samples, window_ms, records, later):
    rate = SampledRate(samples, window_ms)
    now = 0
    history = []
    for gap, value in records:
        now += gap
        rate.record(value, now)
        history.append((now, value))
    now += later
    measured = rate.measure(now)
    expire = samples * window_ms
    assert measured >= 0
    # only windows begun less than samples*window_ms ago are remembered, over at least one window
    recent = sum(v for t, v in history if t > now - expire)
    assert measured <= recent * 1000 / window_ms + 1e-6
    # a record made at least one window inside that horizon is always remembered, and the
    # remembered windows span less than the horizon
    surely_kept = sum(v for t, v in history if t >= now - expire + window_ms)
    assert measured >= surely_kept * 1000 / max(expire, window_ms) - 1e-6
    if not any(t > now - expire for t, _ in history):
        assert measured == 0


@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.integers(0, 10**6), min_size=1, max_size=20), at=st.integers(0, 10_999))
def test_records_within_one_window_give_their_sum_over_the_elapsed_time(values, at):
    rate = SampledRate(11, 1000)
    for value in values:
        rate.record(value, 5000)
    assert rate.measure(5000 + at) == pytest.approx(sum(values) * 1000 / max(at, 1000))


# ---------------------------------------------------------------------- ReplicationQuota


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_quota_is_exceeded_strictly_above_its_bound_read_at_each_check():
    clock = Clock()
    bound = [1000]
    quota = ReplicationQuota(lambda: bound[0], 11, 1, clock)
    assert not quota.exceeded()
    quota.record(1000)
    assert quota.rate() == 1000 and not quota.exceeded()
    quota.record(1)
    assert quota.exceeded()
    bound[0] = 2000
    assert not quota.exceeded()
    bound[0] = 0
    assert quota.exceeded()
    bound[0] = UNLIMITED
    quota.record(10**15)
    assert not quota.exceeded()


@settings(max_examples=150, deadline=None)
@given(bound=st.integers(10_000, 5_000_000), chunk_windows=st.floats(0.05, 4.0),
       step_ms=st.integers(1, 500), duration_ms=st.integers(1000, 10_000))
def test_a_transfer_that_waits_while_the_quota_is_exceeded_keeps_to_the_bound(bound, chunk_windows, step_ms,
                                                                              duration_ms):
    """A sender that moves `chunk` bytes whenever the quota is not exceeded, checking every
    `step_ms`: within the sampling horizon it never moves more than the bound allows plus one
    chunk, and never falls more than two chunks and a step behind it."""
    clock = Clock()
    start = clock.now
    quota = ReplicationQuota(lambda: bound, 11, 1, clock)
    chunk = max(1, int(bound * chunk_windows))
    chunk = max(chunk, bound * step_ms // 1000 + 1)  # a chunk covers a step's allowance
    sent = 0
    elapsed_ms = 0
    while elapsed_ms <= duration_ms:
        clock.now = start + elapsed_ms / 1000
        if not quota.exceeded():
            quota.record(chunk)
            sent += chunk
        elapsed_ms += step_ms
    allowed = bound * max(duration_ms, 1000) / 1000
    assert sent <= allowed + chunk
    assert sent >= bound * duration_ms / 1000 - 2 * chunk - bound * step_ms / 1000


# ---------------------------------------------------------------------- the replica lists


@pytest.mark.parametrize("value, broker, expected", [
    ("0:1,1:2,2:1", 1, {0, 2}),
    ("0:1,1:2,2:1", 2, {1}),
    ("0:1,1:2,2:1", 3, set()),
    (" 0:1 , 5:1 ", 1, {0, 5}),
    ("0:1,", 1, {0}),
    ("", 1, set()),
    ("3:10,4:1", 1, {4}),
])
def test_listed_partitions_are_those_named_with_this_broker(value, broker, expected):
    assert parse_throttled_replicas(value, broker) == frozenset(expected)


def test_star_throttles_every_partition_on_every_broker():
    for value in ("*", " * ", "*,"):
        parsed = parse_throttled_replicas(value, 7)
        assert parsed is ALL_REPLICAS
        assert 0 in parsed and 12345 in parsed


pairs = st.lists(st.tuples(st.integers(0, 300), st.integers(0, 5)), max_size=20)


@given(pairs=pairs, broker=st.integers(0, 5), spaces=st.sampled_from(["", " ", "  "]))
def test_parsing_matches_the_pairs(pairs, broker, spaces):
    value = f"{spaces},{spaces}".join(f"{p}:{b}" for p, b in pairs)
    assert parse_throttled_replicas(value, broker) == frozenset(p for p, b in pairs if b == broker)
    typed = TOPIC_CONFIGS["leader.replication.throttled.replicas"].parse(value)  # valid: no error
    assert valid_throttled_replicas(typed)


@pytest.mark.parametrize("value", ["*", "0:1", "0:1,1:2", "", "0:1,", " 0:1 , 1:2 ", "*,", "10:1001"])
def test_valid_lists_are_accepted_on_create_and_alter(value):
    for name in ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas"):
        validate_topic_configs({name: value})


@pytest.mark.parametrize("value", ["x", "0", "0:", ":1", "0:1:2", "-1:1", "0:-1", "*,0:1", "**", "0;1", "a:b",
                                   "0:1;1:2", "0 : 1"])
def test_bad_lists_are_invalid_config(value):
    for name in ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas"):
        with pytest.raises(ConfigError, match=re.escape(
                f"{name} must be the literal '*' or a list of replicas in the following format: "
                "[partitionId]:[brokerId],[partitionId]:[brokerId],...")):
            validate_topic_configs({name: value})


def _kafka_accepts(text: str) -> bool:
    """Kafka's rule written out again: ConfigDef's LIST parsing, then ThrottledReplicaListValidator."""
    trimmed = text.strip()
    items = [] if not trimmed else re.split(r"\s*,\s*", trimmed)
    items = [i.strip() for i in items]
    return all(re.fullmatch(r"([0-9]+:[0-9]+)?", i) for i in items) or "".join(items) == "*"


@settings(max_examples=300)
@given(text=st.text(alphabet="0123:*, x", max_size=14))
def test_validation_is_kafkas_rule(text):
    name = "follower.replication.throttled.replicas"
    try:
        validate_topic_configs({name: text})
        accepted = True
    except ConfigError:
        accepted = False
    assert accepted == _kafka_accepts(text)
    if accepted:
        assert valid_throttled_replicas(parse_value(name, TOPIC_CONFIGS[name].type, text))


# ---------------------------------------------------------------------- broker configs


def broker_config(**props: str) -> BrokerConfig:
    return BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0", "broker.id": "1", **props})


def test_rates_default_to_unlimited_and_are_dynamic():
    config = broker_config()
    for name in ("leader.replication.throttled.rate", "follower.replication.throttled.rate"):
        assert config.get(name) == UNLIMITED
        config.validate_dynamic_configs({name: "1048576"}, per_broker=True)
        config.validate_dynamic_configs({name: "1048576"}, per_broker=False)  # as cluster default too
        with pytest.raises(InvalidRequestError, match="Value must be at least 0"):
            config.validate_dynamic_configs({name: "-1"}, per_broker=True)
    assert config.get("replication.quota.window.num") == 11
    assert config.get("replication.quota.window.size.seconds") == 1


def test_rate_layers_per_broker_over_cluster_default_over_static():
    config = broker_config(**{"follower.replication.throttled.rate": "100"})
    throttle = ReplicationThrottle(1, config, Topics())
    assert throttle.follower.bound == 100
    config.set_dynamic_configs(False, {"follower.replication.throttled.rate": "200"})
    assert throttle.follower.bound == 200
    config.set_dynamic_configs(True, {"follower.replication.throttled.rate": "300"})
    assert throttle.follower.bound == 300
    config.set_dynamic_configs(True, {})
    assert throttle.follower.bound == 200
    assert throttle.leader.bound == UNLIMITED


# ---------------------------------------------------------------------- decisions


class Topics:
    """The metadata store as the throttle sees it: topics with config overrides."""

    def __init__(self) -> None:
        self.topics: dict[str, TopicMetadata] = {}

    def get_topic(self, name: str) -> TopicMetadata | None:
        return self.topics.get(name)

    def set_configs(self, name: str, **configs: str) -> None:
        meta = self.topics.get(name) or TopicMetadata(name, uuid.uuid4(), (PartitionMetadata(0, (1, 2), (1, 2), 1),))
        self.topics[name] = meta._replace(
            configs=MappingProxyType({k.replace("_", "."): v for k, v in configs.items()}))


def test_leader_throttles_only_listed_partitions_for_followers_outside_the_isr_over_the_rate():
    clock = Clock()
    topics = Topics()
    config = broker_config(**{"leader.replication.throttled.rate": "1000"})
    throttle = ReplicationThrottle(1, config, topics, clock)
    topics.set_configs("t", leader_replication_throttled_replicas="0:1,1:2")
    topics.set_configs("u")
    throttle.leader.record(5000)
    assert throttle.leader.exceeded()
    assert throttle.should_leader_throttle("t", 0, follower_in_sync=False)
    assert not throttle.should_leader_throttle("t", 0, follower_in_sync=True)  # ISR members never
    assert not throttle.should_leader_throttle("t", 1, follower_in_sync=False)  # listed for broker 2
    assert not throttle.should_leader_throttle("u", 0, follower_in_sync=False)  # no list
    assert not throttle.should_leader_throttle("gone", 0, follower_in_sync=False)
    assert throttle.leader_throttled("t", 0) and not throttle.leader_throttled("t", 1)
    # the follower side is separate
    assert not throttle.should_follower_throttle("t", 0, caught_up=False)
    # the rate falls as time passes
    clock.now += 5
    assert not throttle.should_leader_throttle("t", 0, follower_in_sync=False)
    # a topic config change applies at the next check
    throttle.leader.record(10_000)
    topics.set_configs("t", leader_replication_throttled_replicas="*")
    assert throttle.should_leader_throttle("t", 1, follower_in_sync=False)
    topics.set_configs("t")
    assert not throttle.should_leader_throttle("t", 0, follower_in_sync=False)
    # and so does a rate change
    topics.set_configs("t", leader_replication_throttled_replicas="*")
    config.set_dynamic_configs(True, {"leader.replication.throttled.rate": str(UNLIMITED)})
    assert not throttle.should_leader_throttle("t", 0, follower_in_sync=False)


def test_follower_throttles_listed_partitions_that_have_not_caught_up_over_the_rate():
    clock = Clock()
    topics = Topics()
    config = broker_config(**{"follower.replication.throttled.rate": "1000"})
    throttle = ReplicationThrottle(2, config, topics, clock)
    topics.set_configs("t", follower_replication_throttled_replicas="0:2,1:1")
    assert not throttle.should_follower_throttle("t", 0, caught_up=False)  # quota not used yet
    throttle.follower.record(1001)
    assert throttle.should_follower_throttle("t", 0, caught_up=False)
    assert not throttle.should_follower_throttle("t", 0, caught_up=True)
    assert not throttle.should_follower_throttle("t", 1, caught_up=False)
    assert throttle.follower_throttled("t", 0) and not throttle.follower_throttled("t", 1)
    assert not throttle.should_leader_throttle("t", 0, follower_in_sync=False)
