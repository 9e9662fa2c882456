"""Feature versioning (KIP-584) as a Kafka 4.x broker reports it: the features this broker supports
and the levels finalized for the cluster (ApiVersions v3+, DescribeFeatures, UpdateFeatures).

The table is data: a part of kafkapy that implements a feature level adds its row with
`register_feature` (e.g. share groups add share.version) before the broker answers ApiVersions.
A finalized level is the one stored in the metadata store by UpdateFeatures, else the feature's
default (the level a new Kafka 4.x cluster is formatted with, limited to what kafkapy implements).
Only the stored levels are written: a ZooKeeper cluster keeps /feature empty until an operator
finalizes something, which is what Kafka 3.7 brokers sharing the cluster need.
"""
from __future__ import annotations

from typing import Mapping, NamedTuple

__all__ = ["FEATURES", "Feature", "FeatureUpdateError", "finalized_level", "finalized_levels", "register_feature", "validate_update"]

# UpdateFeatures' UpgradeType (v1+); v0's AllowDowngrade=true means SAFE_DOWNGRADE
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3
# Kafka's error codes (kafkapy.protocol.error_codes)
INVALID_REQUEST, INVALID_UPDATE_VERSION = 42, 95


class Feature(NamedTuple):
    name: str
    min_version: int
    max_version: int
    default_level: int
    meaning: str = ""


FEATURES: dict[str, Feature] = {}


def register_feature(feature: Feature) -> None:
    """Add (or replace) a supported feature; its default is what a new cluster finalizes."""
    FEATURES[feature.name] = feature


# metadata.version: kafkapy serves Kafka 3.9's protocol (and a few 4.0 additions), so it supports
# the levels up to 3.9-IV0 (21) from 3.3-IV3 (7), Kafka 4.0's minimum.
register_feature(Feature("metadata.version", 7, 21, 21, "3.3-IV3 .. 3.9-IV0"))
# group.version 1: the consumer rebalance protocol (KIP-848), finalized by default as in Kafka 4.0
register_feature(Feature("group.version", 0, 1, 1, "1: KIP-848 consumer groups"))
# kraft.version and transaction.version: level 0 only (no KRaft quorum; transactions as Kafka 3.9,
# without KIP-890 part 2): listed so that clients see the range, never finalized above 0
# share.version 1: share groups (KIP-932), finalized by default as in Kafka 4.2; level 0 turns them
# off (ShareGroupHeartbeat answers UNSUPPORTED_VERSION, broker/handlers/share_groups.py)
register_feature(Feature("share.version", 0, 1, 1, "1: share groups (KIP-932)"))
register_feature(Feature("kraft.version", 0, 0, 0))
register_feature(Feature("transaction.version", 0, 0, 0))


class FeatureUpdateError(Exception):
    def __init__(self, message: str, code: int = INVALID_UPDATE_VERSION):
        super().__init__(message)
        self.code = code


def finalized_levels(stored: Mapping[str, int], features: Mapping[str, Feature] | None = None) -> dict[str, int]:
    """Every finalized feature (level > 0): the stored level, else the feature's default."""
    features = FEATURES if features is None else features
    levels = {name: f.default_level for name, f in features.items()}
    levels.update(stored)
    return {name: level for name, level in sorted(levels.items()) if level > 0}


def finalized_level(store, name: str) -> int:
    """The level of feature `name` finalized in the metadata store `store` (0: not finalized)."""
    return finalized_levels(store.stored_features()[1]).get(name, 0)


def validate_update(name: str, level: int, upgrade_type: int, current: int) -> None:
    """FeatureControlManager's checks for one update (raises FeatureUpdateError)."""
    feature = FEATURES.get(name)
    if upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        raise FeatureUpdateError(f"Unknown upgrade type {upgrade_type}", INVALID_REQUEST)
    if feature is None:
        if level == 0 and upgrade_type != UPGRADE:
            return  # removing a feature nobody finalized
        raise FeatureUpdateError(f"Invalid update version {level} for feature {name}. The broker does not "
                                 "support this feature.")
    if level < 0:
        raise FeatureUpdateError(f"Invalid update version {level} for feature {name}.", INVALID_REQUEST)
    if level != 0 and not feature.min_version <= level <= feature.max_version:
        raise FeatureUpdateError(f"Invalid update version {level} for feature {name}. Broker supports versions "
                                 f"{feature.min_version}-{feature.max_version}")
    if level < current:
        if upgrade_type == UPGRADE:
            raise FeatureUpdateError(f"Invalid update version {level} for feature {name}. Can't downgrade the "
                                     "version of this feature without setting the upgrade type to either "
                                     "safe or unsafe downgrade.")
        if name == "metadata.version":
            raise FeatureUpdateError(f"Invalid metadata.version {level}. Unsafe metadata downgrade is not "
                                     "supported in this version." if upgrade_type == UNSAFE_DOWNGRADE else
                                     f"Invalid metadata.version {level}. Refusing to perform the requested "
                                     "downgrade because it might delete metadata information.")
    if name == "metadata.version" and level == 0:
        raise FeatureUpdateError("Invalid update version 0 for feature metadata.version. Local controller "
                                 f"{name} cannot be removed.")
