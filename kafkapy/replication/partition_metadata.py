"""A partition dir's `partition.metadata` (Kafka's format): the topic id its log belongs to, kept
for the controller's LeaderAndIsr (INCONSISTENT_TOPIC_ID when it names another)."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..log.checkpoints import write_atomically
from ..log.errors import KafkaStorageError
from ..metadata.ids import uuid_from_kafka_str, uuid_to_kafka_str

if TYPE_CHECKING:
    import uuid

__all__ = ["PARTITION_METADATA_FILE", "read_partition_topic_id", "write_partition_topic_id"]

PARTITION_METADATA_FILE = "partition.metadata"


def read_partition_topic_id(partition_dir: Path) -> uuid.UUID | None:
    """The topic id in a partition dir's `partition.metadata` (Kafka's format), None if absent.

    Raises KafkaStorageError on a file that cannot be read or parsed."""
    path = Path(partition_dir) / PARTITION_METADATA_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise KafkaStorageError(f"cannot read {path}: {exc}") from None
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    try:
        if fields.get("version") != "0":
            raise ValueError(f"unsupported version {fields.get('version')!r}")
        return uuid_from_kafka_str(fields["topic_id"])
    except (KeyError, ValueError) as exc:
        raise KafkaStorageError(f"malformed {path}: {exc}") from None


def write_partition_topic_id(partition_dir: Path, topic_id: uuid.UUID) -> None:
    write_atomically(Path(partition_dir) / PARTITION_METADATA_FILE,
                     f"version: 0\ntopic_id: {uuid_to_kafka_str(topic_id)}\n".encode())
