"""kafkapy's Spark integration: page-view pipeline on Spark's built-in Kafka source and sink."""
