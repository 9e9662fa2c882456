"""Apache Kafka\x27s own CLI tools, Streams, Connect and MirrorMaker 2 against kafkapy (kafka_jars.py)."""
