"""Fixtures for the conformance tests; see conformance/pytest_broker.py for what they provide."""

from conformance.pytest_broker import *  # noqa: F401,F403  (broker fixtures and the report hook)
