"""Where the topics' tables live: the catalog and warehouse settings of a broker (the broker configs
kafkapy.iceberg.catalog.uri and kafkapy.iceberg.warehouse) and opening the catalog with pyiceberg.

Shared by the tables worker process and `kafkapy tables` (both open the catalog the same way).
pyiceberg is imported only by `open_catalog`.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

__all__ = ["CATALOG_NAME", "NAMESPACE", "NEXT_OFFSETS", "CatalogSettings", "dead_letter_table", "main_table",
           "next_offsets", "open_catalog"]

CATALOG_NAME = "kafkapy"
NAMESPACE = "kafka"
DEAD_LETTER_SUFFIX = "~dlq"
# the snapshot summary property holding {"<partition>": <next offset covered>} (the exactly-once anchor)
NEXT_OFFSETS = "kafkapy.next-offsets"


def main_table(topic: str) -> tuple[str, str]:
    return (NAMESPACE, topic)


def dead_letter_table(topic: str) -> tuple[str, str]:
    return (NAMESPACE, topic + DEAD_LETTER_SUFFIX)


@dataclass(frozen=True, slots=True)
class CatalogSettings:
    """A catalog URI (SQLAlchemy URL of a SQL catalog, or a REST catalog's http(s) URL) and a warehouse
    (a local path or a file:// / s3:// URI)."""

    uri: str
    warehouse: str

    @classmethod
    def from_config(cls, get, log_dirs: list[str]) -> CatalogSettings:
        """The settings a broker with config getter `get` and `log_dirs` uses (defaults under the first
        log dir: iceberg/catalog.db and iceberg/warehouse)."""
        base = Path(log_dirs[0]).absolute() / "iceberg"
        uri = get("kafkapy.iceberg.catalog.uri") or f"sqlite:///{base / 'catalog.db'}"
        warehouse = get("kafkapy.iceberg.warehouse") or str(base / "warehouse")
        return cls(uri, warehouse)

    @property
    def warehouse_uri(self) -> str:
        """The warehouse as a URI (a bare path becomes file://<absolute path>)."""
        if "://" in self.warehouse:
            return self.warehouse
        return "file://" + os.path.abspath(self.warehouse)

    def local_dirs(self) -> list[Path]:
        """Local directories the catalog and warehouse need (made before the catalog opens)."""
        dirs = []
        if self.uri.startswith("sqlite:///"):
            db = self.uri[len("sqlite:///"):]
            if db and db != ":memory:":
                dirs.append(Path(db).parent)
        parsed = urlparse(self.warehouse_uri)
        if parsed.scheme == "file":
            dirs.append(Path(parsed.path))
        return dirs


def open_catalog(settings: CatalogSettings, create_dirs: bool = True):
    """The pyiceberg catalog named `kafkapy` for `settings` (a SqlCatalog, or a RestCatalog for http(s))."""
    if settings.uri.lower().startswith(("http://", "https://")):
        from pyiceberg.catalog.rest import RestCatalog

        return RestCatalog(CATALOG_NAME, uri=settings.uri, warehouse=settings.warehouse_uri)
    if create_dirs:
        for directory in settings.local_dirs():
            directory.mkdir(parents=True, exist_ok=True)
    from pyiceberg.catalog.sql import SqlCatalog

    return SqlCatalog(CATALOG_NAME, uri=settings.uri, warehouse=settings.warehouse_uri)


def next_offsets(table) -> dict[int, int]:
    """The `kafkapy.next-offsets` map of a table's current snapshot ({} without one)."""
    snapshot = table.current_snapshot()
    if snapshot is None or snapshot.summary is None:
        return {}
    text = snapshot.summary.get(NEXT_OFFSETS)
    if not text:
        return {}
    return {int(partition): int(offset) for partition, offset in json.loads(text).items()}
