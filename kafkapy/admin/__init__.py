"""The admin command line's building blocks: a synchronous Kafka client (client.py) and one module
per noun of `kafkapy <noun> <verb>` (topics, groups, configs, produce, consume, acls, cluster)."""
