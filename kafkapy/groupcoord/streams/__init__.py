"""Streams groups (KIP-1071): the coordinator's model of streams groups and their task assignment."""
