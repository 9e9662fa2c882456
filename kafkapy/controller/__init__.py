"""The cluster controller (ZooKeeper mode, as Kafka 3.7): election and fencing
(`kafka_controller.py`), its requests to brokers (`channel.py`), its answers to brokers'
requests (`broker_requests.py`), leader elections (`leader_election.py`) and partition
reassignment (`reassignment.py`). The metadata it reads and writes is `kafkapy/metadata/`.
"""
