"""Cluster mode through ZooKeeper, as Kafka 3.7's ZooKeeper mode: znode layout (`paths`), the
kazoo-backed client (`client`) and the cluster broker's metadata store (`store`).

Import the submodules directly; this package imports nothing so that `paths` stays usable without
kazoo.
"""
