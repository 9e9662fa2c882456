"""Processes for a local kafkapy cluster: a ZooKeeper server and brokers."""
