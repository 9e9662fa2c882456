"""The error of a value (or a schema) that cannot become a table row: its own module so that the
formats (avro_arrow, json_arrow, proto_arrow) and the translator that picks them (values) import it
from below instead of from each other."""
from __future__ import annotations


class Untranslatable(Exception):
    """A value (or a schema) that cannot become a row; the message is the dead letter's reason."""
