"""Network clients kafkapy brokers use to talk to each other."""
