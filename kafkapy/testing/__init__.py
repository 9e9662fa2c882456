"""kafkapy as a test broker, for any test framework:

    from kafkapy.testing import KafkaBroker

    with KafkaBroker() as broker:                      # in this process, its own event-loop thread
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers})

    with KafkaBroker(isolation="process", **{"num.partitions": 3}) as broker:   # a child process
        ...

Brokers listen on 127.0.0.1 on a free port and keep their data in a temporary directory that is
removed when they stop. Keyword arguments are Kafka broker properties (dots written as they are, so
pass them with `**{...}`). See docs/testing.md.
"""
from .broker import KafkaBroker, KafkaBrokerError
from .cluster import KafkaCluster

__all__ = ["KafkaBroker", "KafkaBrokerError", "KafkaCluster"]
