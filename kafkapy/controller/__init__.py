"""The cluster controller (ZooKeeper mode, as Kafka 3.7): election and fencing
(`kafka_controller.py`), its requests to brokers (`channel.py`), its answers to brokers'
requests (`broker_requests.py`), leader elections (`leader_election.py`), partition
reassignment (`reassignment.py`), topic creation and deletion (`topic_events.py`), preferred-leader
elections and balancing (`preferred_leaders.py`) and log dir events (`log_dir_events.py`). The metadata it reads and writes is `kafkapy/metadata/`.
"""
