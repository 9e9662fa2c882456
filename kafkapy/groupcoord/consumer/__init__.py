"""KIP-848 consumer groups: the coordinator side of the `consumer` rebalance protocol.

group.py holds the model, reconciliation.py a member's next assignment, membership.py the
ConsumerGroupHeartbeat processing; assignors.py and topic_regex.py the server-side assignors and
regex subscriptions; records.py/persistence.py the __consumer_offsets records.
"""
