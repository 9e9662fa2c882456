"""The Java client (kafka-clients) cells of the client matrix."""
