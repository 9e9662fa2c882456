"""A topic's records as an Apache Iceberg table (issue 34): see docs/tables.md."""
