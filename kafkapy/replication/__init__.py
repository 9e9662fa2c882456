"""Replication: the partitions a broker hosts and their replicas (docs/cluster.md).

`ReplicaManager` (replica_manager.py) is on every broker, as Kafka's: the request handlers hand it
appends (`append_records`) and reads (`read_for_consumer`, `read_for_follower`), and it owns the
leader epochs, the ISR, the high watermark and the acks=all wait. On a single node every partition
has one replica (a cluster of one, kafkapy/broker/cluster_of_one.py: `lead_alone`); in a cluster
it applies the controller's LeaderAndIsr and StopReplica, shrinks the ISR and checkpoints high
watermarks. `Partition` (partition.py) holds one replica's rules; `ReplicaFetcherManager`
(fetcher.py) copies followed partitions from their leaders and `AlterPartitionManager`
(alter_partition.py) sends ISR changes to the controller: those two talk to other brokers and
are made on first use, so a single node never loads them. `Purgatory` (purgatory.py) parks
waiting fetches and acks=all appends; durability.py joins fsync-on-ack rounds.
"""
