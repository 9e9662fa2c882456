"""Transactions: Kafka's transaction coordinator over __transaction_state."""
from .config import TransactionCoordinatorConfig
from .coordinator import InitProducerIdResult, TransactionCoordinator, TransactionDescription
from .metadata import TransactionMetadata, TransactionState
from .state_manager import TRANSACTION_STATE_TOPIC, transaction_state_topic_configs

__all__ = [
    "InitProducerIdResult", "TRANSACTION_STATE_TOPIC", "TransactionCoordinator", "TransactionCoordinatorConfig",
    "TransactionDescription", "TransactionMetadata", "TransactionState", "transaction_state_topic_configs",
]
