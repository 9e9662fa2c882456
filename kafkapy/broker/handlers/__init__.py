"""One module per API family; importing this package registers every handler with dispatch."""
from . import (  # noqa: F401
    api_versions,
    fetch,
    list_offsets,
    metadata,
    produce,
)
