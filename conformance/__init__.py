"""Conformance tests: real third-party Kafka clients against a real kafkapy process."""
