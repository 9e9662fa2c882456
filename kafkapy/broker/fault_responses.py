"""Fault injection's error answers (issue 12): a well-formed response to any request the broker
serves, with an injected error code in every error field (`error_response`), and the broker a
Metadata error answer lists (`AdvertisedNode`). Schema-driven, from the generated messages; the
rules that decide when to answer this way are in faults.py.
"""
from __future__ import annotations

from typing import Any, Protocol

from ..protocol.error_codes import ErrorCode
from ..protocol.messages import RESPONSE_TYPES
from ..protocol.primitives import GeneratedStruct

__all__ = ["AdvertisedNode", "error_response"]


class AdvertisedNode(Protocol):
    """The broker a Metadata error answer lists as the only one (`error_response`'s `broker`)."""

    node_id: int
    advertised_host: str
    advertised_port: int

    @property
    def cluster_id(self) -> str | None: ...


# -- error responses ------------------------------------------------------------------------------
# A response array is filled from the request arrays of these names (concatenated; a request has
# one of them), element by element; arrays not named here (brokers, configs, aborted transactions,
# members of a JoinGroup...) stay empty.
_ARRAY_SOURCES: dict[str, tuple[str, ...]] = {
    "responses": ("topic_data", "topics", "topic_names", "resources"),
    "partition_responses": ("partition_data",),
    "partitions": ("partitions", "partition_indexes", "partition_data"),
    "partition_result": ("partitions",),
    "topics": ("topics",),
    "topic_results": ("topics",),
    "results_by_topic_v3_and_below": ("v3_and_below_topics",),
    "results_by_transaction": ("transactions",),
    "results_by_partition": ("partitions",),
    "groups": ("groups", "group_ids"),
    "coordinators": ("coordinator_keys",),
    "results": ("resources", "topics", "groups_names", "creations", "deletions", "upsertions"),
    "filter_results": ("filters",),
    "members": ("members",),
    "markers": ("markers",),
    "entries": ("entries",),
    "entity": ("entity",),
    "transaction_states": ("transactional_ids",),
    "replica_election_results": ("topic_partitions",),
}
# identity fields copied from the request element: response attribute -> request attributes
_COPIED: dict[str, tuple[str, ...]] = {
    "name": ("name", "topic"),
    "topic": ("topic", "name"),
    "topic_id": ("topic_id",),
    "partition_index": ("partition_index", "partition", "index"),
    "partition": ("partition", "partition_index", "index"),
    "index": ("index", "partition_index", "partition"),
    "group_id": ("group_id",),
    "transactional_id": ("transactional_id",),
    "key": ("key",),
    "member_id": ("member_id",),
    "group_instance_id": ("group_instance_id",),
    "resource_type": ("resource_type",),
    "resource_name": ("resource_name",),
    "entity_type": ("entity_type",),
    "entity_name": ("entity_name",),
    "user": ("name",),
    "producer_id": ("producer_id",),
}
# where a request array holds bare values (partition numbers, topic names, coordinator keys)
_INT_IDENTITY = ("partition_index", "partition", "index", "partition_id")
_STR_IDENTITY = ("name", "topic", "key", "group_id", "transactional_id")
_ERROR_FIELDS = frozenset({"error_code", "partition_error_code"})
# Kafka answers "unknown" with -1 in these (Node.noNode, INVALID_OFFSET, NO_PRODUCER_ID, ...)
_MINUS_ONE = frozenset({
    "node_id", "port", "leader_id", "leader_epoch", "controller_id", "producer_id", "producer_epoch",
    "generation_id", "high_watermark", "last_stable_offset", "log_start_offset", "committed_offset",
    "committed_leader_epoch", "offset", "timestamp", "end_offset", "base_offset", "preferred_read_replica",
    "low_watermark"})
_SIGNED = frozenset({"int8", "int16", "int32", "int64"})
# Fetch's top-level error_code is the fetch session's: set only for these, with no partitions
# (Kafka's FetchResponse v13+ shape); any other code goes into every partition
_FETCH_SESSION_ERRORS = frozenset({ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH,
                                   ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR})
FETCH_KEY, METADATA_KEY, ALTER_REPLICA_LOG_DIRS_KEY = 1, 3, 34


def error_response(request: Any, version: int, code: int, message: str | None = None,
                   broker: AdvertisedNode | None = None) -> Any:
    """A well-formed response to `request` (at `version`) that carries error `code` everywhere it can.

    Schema-driven: the response's topics/partitions (or groups, coordinator keys, transactions,
    resources) mirror the request's, with `code` in each element's error field, and the top-level
    error_code is set where the response has one; ids nobody has are -1. Metadata gets this broker
    as its only broker so that a client keeps a place to reconnect to; Fetch keeps its top-level
    error for fetch-session errors only (elsewhere it means "the whole session failed").
    """
    key = request.API_KEY
    response_cls = RESPONSE_TYPES[key]
    if key == FETCH_KEY and code in _FETCH_SESSION_ERRORS:
        return response_cls(error_code=code, session_id=0)
    response = _mirror(request, response_cls, version, code, message, top=True)
    if key == FETCH_KEY:
        response.error_code = 0
        response.session_id = 0
    elif key == ALTER_REPLICA_LOG_DIRS_KEY:
        # results are by topic, the request's topics are by destination dir
        result_cls = _struct_of(response_cls, "results")
        partition_cls = _struct_of(result_cls, "partitions")
        response.results = [
            result_cls(topic_name=topic.name, partitions=[partition_cls(partition_index=p, error_code=code)
                                                          for p in topic.partitions])
            for log_dir in request.dirs for topic in log_dir.topics]
    elif key == METADATA_KEY and broker is not None:
        node_cls = _struct_of(response_cls, "brokers")
        response.brokers = [node_cls(node_id=broker.node_id, host=broker.advertised_host,
                                     port=broker.advertised_port, rack=None)]
        response.controller_id = broker.node_id
        try:
            response.cluster_id = broker.cluster_id
        except Exception:  # a store without a cluster id yet: the field is nullable
            response.cluster_id = None
    return response


def _struct_of(cls: type, attr: str) -> type:
    return next(f.struct for f in cls.SCHEMA if f.attr == attr)


def _mirror(source: Any, cls: type, version: int, code: int, message: str | None, top: bool = False) -> Any:
    """An instance of `cls` built from the request element `source` (a struct, or a bare value)."""
    obj = cls()
    for f in cls.SCHEMA:
        if not f.present(version):
            continue
        attr = f.attr
        if f.is_array:
            if f.type != "struct":
                continue
            sources = _ARRAY_SOURCES.get(attr)
            if not sources or not isinstance(source, GeneratedStruct):
                continue
            items = [item for name in sources if isinstance(value := getattr(source, name, None), list)
                     for item in value]
            setattr(obj, attr, [_mirror(item, f.struct, version, code, message) for item in items])
        elif attr in _ERROR_FIELDS and f.type == "int16":
            setattr(obj, attr, code)
        elif attr == "error_message" and f.type == "string":
            setattr(obj, attr, message if message is not None else f"{ErrorCode(code).name} (injected by kafkapy)")
        elif f.type == "struct":
            continue
        elif isinstance(source, GeneratedStruct):
            if not top:
                for name in _COPIED.get(attr, ()):
                    if name in source.__match_args__:
                        setattr(obj, attr, getattr(source, name))
                        break
                else:
                    if attr in _MINUS_ONE and f.type in _SIGNED:
                        setattr(obj, attr, -1)
            elif attr in _MINUS_ONE and f.type in _SIGNED:
                setattr(obj, attr, -1)
        elif isinstance(source, int) and attr == _first_present(cls, version, _INT_IDENTITY):
            setattr(obj, attr, source)
        elif isinstance(source, str) and attr == _first_present(cls, version, _STR_IDENTITY):
            setattr(obj, attr, source)
        elif attr in _MINUS_ONE and f.type in _SIGNED:
            setattr(obj, attr, -1)
    return obj


def _first_present(cls: type, version: int, names: tuple[str, ...]) -> str | None:
    present = {f.attr for f in cls.SCHEMA if f.present(version) and not f.is_array}
    return next((name for name in names if name in present), None)
