"""One module per API family; importing this package registers every handler with dispatch."""
from . import (  # noqa: F401
    acls,
    api_versions,
    cluster,
    configs,
    delete_records,
    describe_topic_partitions,
    fetch,
    groups,
    init_producer_id,
    list_offsets,
    metadata,
    offset_for_leader_epoch,
    offsets,
    produce,
    replicas,
    topics,
)
