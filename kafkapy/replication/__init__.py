"""Replication between cluster brokers (ZooKeeper mode; docs/cluster.md, the sheet's section 4).

`ReplicaManager` (replica_manager.py) hosts the partitions the controller assigns to this broker:
it applies LeaderAndIsr and StopReplica, answers follower fetches, waits for acks=all, shrinks the
ISR and checkpoints high watermarks. `Partition` (partition.py) holds one replica's rules,
`ReplicaFetcherManager` (fetcher.py) copies followed partitions from their leaders, and
`AlterPartitionManager` (alter_partition.py) sends ISR changes to the controller. Imported only
in cluster mode: a single node never loads this package.
"""
