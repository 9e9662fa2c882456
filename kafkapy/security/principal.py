"""Kafka's principals: `User:<name>`, and `User:ANONYMOUS` for a connection that did not authenticate."""
from __future__ import annotations

from typing import NamedTuple

__all__ = ["ANONYMOUS", "KafkaPrincipal"]


class KafkaPrincipal(NamedTuple):
    """A principal as Kafka writes it: `<type>:<name>`."""

    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """`User:alice` -> KafkaPrincipal("User", "alice"); ValueError without a type."""
        kind, sep, name = text.partition(":")
        if not sep or not kind:
            raise ValueError(f"expected a principal of the form <type>:<name>, got {text!r}")
        return cls(kind, name)

    @classmethod
    def user(cls, name: str) -> KafkaPrincipal:
        return cls("User", name)


ANONYMOUS = KafkaPrincipal("User", "ANONYMOUS")
