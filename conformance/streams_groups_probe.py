"""The same raw StreamsGroupHeartbeat/Describe exchanges against any broker, as data to compare.

`probe(bootstrap)` runs a fixed scenario with kafkapy's wire client (conformance/test_streams_groups_wire's
helpers) and returns what a client would see at each step: error codes, statuses, member epochs
relative to the first one, tasks, group states, describe fields. The differential test runs it on
Kafka 4.4.0 (conformance/real_kafka.py) and on kafkapy and compares the two.
"""
from __future__ import annotations

import asyncio
import time
import uuid

from conformance.test_streams_groups_wire import _active, _beat, _join, _Req, _topology, _Wire
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import StreamsGroupDescribeRequest

# Both brokers run with these (Kafka's names): no initial delay or assignment interval, so the
# exchanges do not depend on timing; the delay is probed on one group through its group config.
PROBE_BROKER_CONFIG = {
    "group.streams.initial.rebalance.delay.ms": "0",
    "group.streams.assignment.interval.ms": "0",
    "group.streams.min.session.timeout.ms": "6000",
    "group.streams.session.timeout.ms": "10000",
}


def _status(response) -> list[int]:
    return sorted(s.status_code for s in (response.status or []))


def _step(response, base_epoch: int | None = None) -> dict:
    out = {"error": ErrorCode(response.error_code).name, "status": _status(response),
           "active": _active(response)}
    if base_epoch is not None and response.error_code == 0:
        out["epoch"] = response.member_epoch - base_epoch
    return out


def _sleep(wire: _Wire, seconds: float) -> None:
    wire.loop.run_until_complete(asyncio.sleep(seconds))


def _coordinator_wire(bootstrap: str, group: str) -> _Wire:
    from kafkapy.protocol.messages import FindCoordinatorRequest

    wire = _Wire(bootstrap)
    for _ in range(100):
        found = wire.send(FindCoordinatorRequest(key=group, key_type=0), 3)
        if found.error_code == 0:
            break
        _sleep(wire, 0.2)
    target = f"{found.host}:{found.port}"
    if target != bootstrap:
        wire.close()
        wire = _Wire(target)
    return wire


def probe(bootstrap: str) -> dict:
    run = uuid.uuid4().hex[:6]
    source, group = f"probe-in-{run}", f"probe-app-{run}"
    seen: dict = {}
    wire = _coordinator_wire(bootstrap, group)
    try:
        wire.create_topic(source, 2)
        # Kafka's group coordinator sees a new topic once the metadata image is published, a moment
        # after CreateTopics answers: joined at once it once said MISSING_SOURCE_TOPICS (a CI run)
        _sleep(wire, 1.0)
        topology = _topology(source, group, epoch=1)
        # 1. the first member: internal topics are missing, then created by the coordinator
        r = wire.send(_join(group, "m1", topology))
        base = r.member_epoch
        seen["join m1"] = _step(r, base)
        steps = []
        for _ in range(50):
            r = wire.send(_beat(group, "m1", r.member_epoch, _active(r) or {}))
            step = _step(r)  # epochs here depend on when the internal topics reach the metadata
            if not steps or steps[-1] != step:
                steps.append(step)
            if r.error_code or (_active(r) and not r.status):
                break
            _sleep(wire, 0.2)
        seen["m1 until stable"] = steps
        m1 = r
        base = r.member_epoch  # later epochs relative to the stable one
        # 2. a second member: nothing until m1 revoked
        r2 = wire.send(_join(group, "m2", topology))
        seen["join m2"] = _step(r2, base)
        r2 = wire.send(_beat(group, "m2", r2.member_epoch, {}))
        seen["m2 before revocation"] = _step(r2, base)
        m1 = wire.send(_beat(group, "m1", m1.member_epoch, _active(m1)))
        seen["m1 told to revoke"] = _step(m1, base)
        kept = _active(m1) or {}
        m1 = wire.send(_beat(group, "m1", m1.member_epoch, kept))
        seen["m1 revoked"] = _step(m1, base)
        r2 = wire.send(_beat(group, "m2", r2.member_epoch, {}))
        seen["m2 after revocation"] = _step(r2, base)
        seen["tasks spread"] = sorted(len(p) for p in ((_active(m1) or kept).get("0", []),
                                                       (_active(r2) or {}).get("0", [])))
        # 3. bad input: Kafka's errors, and the group unchanged
        m1_epoch, m2_epoch = m1.member_epoch, r2.member_epoch
        bad = {
            "epoch ahead": _beat(group, "m1", m1_epoch + 5, kept),
            "unknown member": _beat(group, "nobody", m1_epoch, {}),
            "unknown subtopology": _beat(group, "m2", m2_epoch, {"9": [0]}),
            "task out of range": _beat(group, "m2", m2_epoch, {"0": [7]}),
            "other topology": _join(group, "m3", _topology(source + "-other", group, epoch=1)),
            "internal topic": _join(group, "m3", _topology("__consumer_offsets", group)),
            "no rebalance timeout": _join(group, "m3", topology),
            "no topology": _join(group, "m3", None),
            "epoch -3": _beat(group, "m1", -3),
        }
        bad["no rebalance timeout"].rebalance_timeout_ms = -1
        regex = _topology(source, group, epoch=1)
        regex.subtopologies[0].source_topic_regex = ["probe-.*"]
        bad["source regex"] = _join(group, "m3", regex)
        changelog = _topology(source, group, epoch=1)
        changelog.subtopologies[0].state_changelog_topics[0].partitions = 2
        bad["changelog partitions"] = _join(group, "m3", changelog)
        seen["bad"] = {name: ErrorCode(wire.send(req).error_code).name for name, req in bad.items()}
        r3 = wire.send(_join(group, "m3", _topology(source, group, epoch=0)))
        seen["stale topology epoch"] = _step(r3)
        if r3.error_code == 0:
            wire.send(_beat(group, "m3", -1))
        # 4. describe
        d = wire.send(StreamsGroupDescribeRequest(group_ids=[group, "no-such-" + group],
                                                  include_authorized_operations=False)).groups
        g = d[0]
        seen["describe"] = {
            "error": g.error_code, "state": g.group_state, "epochs equal": g.group_epoch == g.assignment_epoch,
            "members": sorted((m.member_id, m.member_epoch - base, m.topology_epoch, m.process_id, m.is_classic)
                              for m in g.members),
            "topology epoch": None if g.topology is None else g.topology.epoch,
            "topology": None if g.topology is None else [
                (s.subtopology_id, s.source_topics, [(t.name, t.partitions) for t in s.state_changelog_topics])
                for s in g.topology.subtopologies],
            "unknown group": (ErrorCode(d[1].error_code).name, d[1].error_message),
        }
        # 5. leaving: m2's tasks go back to m1
        seen["m2 leaves"] = _step(wire.send(_beat(group, "m2", -1)))
        m1 = wire.send(_beat(group, "m1", m1.member_epoch, _active(m1) or kept))
        seen["m1 after leave"] = _step(m1, base)
        m1 = wire.send(_beat(group, "m1", m1.member_epoch, _active(m1) or kept))
        seen["m1 after leave, next"] = _step(m1, base)
        seen["m1 leaves"] = _step(wire.send(_beat(group, "m1", -1)))
        d = wire.send(StreamsGroupDescribeRequest(group_ids=[group], include_authorized_operations=False)).groups[0]
        seen["state when empty"] = d.group_state
        seen["heartbeat after leaving"] = ErrorCode(wire.send(_beat(group, "m1", m1.member_epoch, {})).error_code).name
    finally:
        wire.close()
    return seen


def initial_delay_probe(bootstrap: str, delay_ms: int = 2000) -> dict:
    """A new group with streams.initial.rebalance.delay.ms set on the group: what its first members
    see while the delay runs and after it."""
    from kafkapy.protocol.messages import IncrementalAlterConfigsRequest

    run = uuid.uuid4().hex[:6]
    source, group = f"probe-in-{run}", f"probe-delay-{run}"
    seen: dict = {}
    wire = _coordinator_wire(bootstrap, group)
    try:
        wire.create_topic(source, 2)
        wire.create_topic(f"{group}-store-changelog", 2)
        R = IncrementalAlterConfigsRequest
        altered = wire.send(R(resources=[R.AlterConfigsResource(resource_type=32, resource_name=group, configs=[
            R.AlterableConfig(name="streams.initial.rebalance.delay.ms", config_operation=0, value=str(delay_ms))])],
            validate_only=False), 1)
        seen["alter"] = ErrorCode(altered.responses[0].error_code).name
        topology = _topology(source, group)
        started = time.monotonic()
        r = wire.send(_join(group, "m1", topology))
        seen["join m1"] = {**_step(r), "epoch": r.member_epoch}
        r = wire.send(_beat(group, "m1", r.member_epoch, {}))
        seen["m1 during delay"] = {**_step(r), "epoch": r.member_epoch}
        r2 = wire.send(_join(group, "m2", topology))
        seen["join m2 during delay"] = {**_step(r2), "epoch": r2.member_epoch}
        _sleep(wire, max(delay_ms / 1000 - (time.monotonic() - started), 0) + 0.5)
        r = wire.send(_beat(group, "m1", r.member_epoch, {}))
        r2 = wire.send(_beat(group, "m2", r2.member_epoch, {}))
        seen["after delay"] = sorted([_step(r)["status"], _step(r2)["status"]])
        seen["tasks after delay"] = sorted(len((_active(x) or {}).get("0", [])) for x in (r, r2))
    finally:
        wire.close()
    return seen


def topics_and_admin_probe(bootstrap: str) -> dict:
    """Statuses for missing and incorrectly partitioned topics, static members, offsets by members,
    and the admin APIs on a streams group."""
    from kafkapy.protocol.messages import (
        DeleteGroupsRequest,
        DescribeGroupsRequest,
        ListGroupsRequest,
        OffsetCommitRequest,
        OffsetDeleteRequest,
        OffsetFetchRequest,
    )

    run = uuid.uuid4().hex[:6]
    source, group = f"probe-in-{run}", f"probe-app-{run}"
    seen: dict = {}
    wire = _coordinator_wire(bootstrap, group)
    try:
        # missing source topic, then a changelog with the wrong partition count
        r = wire.send(_join(group, "m1", _topology(source, group)))
        seen["missing source"] = _step(r)
        seen["missing source detail"] = [s.status_detail for s in r.status]
        base = r.member_epoch
        wire.create_topic(source, 2)
        wire.create_topic(f"{group}-store-changelog", 3)
        _sleep(wire, 1.0)
        r = wire.send(_beat(group, "m1", r.member_epoch, {}))
        seen["wrongly partitioned"] = _step(r, base)
        seen["wrongly partitioned detail"] = [s.status_detail for s in r.status]
        seen["heartbeat interval"] = r.heartbeat_interval_ms
        d = wire.send(StreamsGroupDescribeRequest(group_ids=[group], include_authorized_operations=False)).groups[0]
        seen["state not ready"] = (d.group_state, None if d.topology is None or d.topology.subtopologies is None else [
            (s.subtopology_id, s.source_topics, [(t.name, t.partitions) for t in s.state_changelog_topics])
            for s in d.topology.subtopologies])
        assert wire.send(_beat(group, "m1", -1)).error_code == 0
        # static members on a group whose topics are right
        group2 = f"probe-app-{run}s"
        wire.close()
        wire = _coordinator_wire(bootstrap, group2)
        wire.create_topic(f"{group2}-store-changelog", 2)
        _sleep(wire, 1.0)  # Kafka's metadata image gets the new topic asynchronously
        j = _join(group2, "s1", _topology(source, group2))
        j.instance_id = "i1"
        r = wire.send(j)
        base = r.member_epoch
        r = wire.send(_beat(group2, "s1", r.member_epoch, _active(r) or {}))
        held = _active(r) or {}
        seen["static s1"] = _step(r, base)
        seen["static s1 full"] = sorted(held.get("0", []))
        j2 = _join(group2, "s2", _topology(source, group2))
        j2.instance_id = "i1"
        seen["same instance while s1 is in"] = ErrorCode(wire.send(j2).error_code).name
        leave = _beat(group2, "s1", -2, None)
        leave.instance_id = "i1"
        seen["static leave"] = _step(wire.send(leave))
        r2 = wire.send(j2)
        seen["replacement s2"] = _step(r2, base)
        d = wire.send(StreamsGroupDescribeRequest(group_ids=[group2], include_authorized_operations=False)).groups[0]
        seen["after replacement"] = sorted((m.member_id, m.instance_id, m.member_epoch - base) for m in d.members)
        old = _beat(group2, "s1", r.member_epoch, held)
        old.instance_id = "i1"
        seen["old static member"] = ErrorCode(wire.send(old).error_code).name
        # offsets by the member
        epoch = r2.member_epoch

        def commit(member: str, member_epoch: int, version: int = 9) -> str:
            req = OffsetCommitRequest(
                group_id=group2, generation_id_or_member_epoch=member_epoch, member_id=member,
                topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=source, partitions=[
                    OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0, committed_offset=5)])])
            return ErrorCode(wire.send(req, version).topics[0].partitions[0].error_code).name

        seen["commit"] = commit("s2", epoch)
        seen["commit epoch ahead"] = commit("s2", epoch + 1)
        seen["commit unknown member"] = commit("zz", epoch)
        seen["commit v8"] = commit("s2", epoch, 8)
        seen["commit admin while members"] = commit("", -1)

        def fetch(member, member_epoch) -> str:
            req = OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(
                group_id=group2, member_id=member, member_epoch=member_epoch, topics=[
                    OffsetFetchRequest.OffsetFetchRequestTopics(name=source, partition_indexes=[0])])],
                require_stable=False)
            return ErrorCode(wire.send(req, 9).groups[0].error_code).name

        seen["fetch"] = fetch("s2", epoch)
        seen["fetch stale"] = fetch("s2", epoch + 1)
        seen["fetch admin"] = fetch(None, -1)
        delete = OffsetDeleteRequest(group_id=group2, topics=[OffsetDeleteRequest.OffsetDeleteRequestTopic(
            name=source, partitions=[OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)])])
        od = wire.send(delete, 0)
        seen["offset delete"] = (ErrorCode(od.error_code).name,
                                 [ErrorCode(p.error_code).name for t in od.topics for p in t.partitions])
        seen["delete group"] = ErrorCode(wire.send(DeleteGroupsRequest(groups_names=[group2]), 2)
                                         .results[0].error_code).name
        described = wire.send(DescribeGroupsRequest(groups=[group2], include_authorized_operations=False), 5)
        seen["describe groups v5"] = (ErrorCode(described.groups[0].error_code).name, described.groups[0].group_state,
                                      described.groups[0].protocol_type)
        listed = wire.send(ListGroupsRequest(states_filter=[], types_filter=["streams"]), 5)
        seen["list streams"] = sorted((g.group_state, g.group_type, g.protocol_type)
                                      for g in listed.groups if g.group_id == group2)
        listed = wire.send(ListGroupsRequest(states_filter=[], types_filter=["consumer"]), 5)
        seen["list consumer"] = [g.group_id for g in listed.groups if g.group_id == group2]
        # leave; the group is Empty: admin commits, offset delete and group delete go through
        leave = _beat(group2, "s2", -1, None)
        leave.instance_id = "i1"
        seen["static final leave"] = _step(wire.send(leave))
        seen["commit admin when empty"] = commit("", -1)
        od = wire.send(delete, 0)
        seen["offset delete when empty"] = [ErrorCode(p.error_code).name for t in od.topics for p in t.partitions]
        seen["delete group when empty"] = ErrorCode(wire.send(DeleteGroupsRequest(groups_names=[group2]), 2)
                                                    .results[0].error_code).name
        d = wire.send(StreamsGroupDescribeRequest(group_ids=[group2], include_authorized_operations=False)).groups[0]
        seen["describe deleted"] = ErrorCode(d.error_code).name
    finally:
        wire.close()
    return seen


def response_fields_probe(bootstrap: str) -> dict:
    """The heartbeat's other fields (intervals, recovery lag, endpoint information for interactive
    queries) and StreamsGroupDescribe v1's fields (assignor, topology description status, operations)."""
    run = uuid.uuid4().hex[:6]
    source, group = f"probe-in-{run}", f"probe-app-{run}"
    seen: dict = {}
    wire = _coordinator_wire(bootstrap, group)
    try:
        wire.create_topic(source, 2)
        wire.create_topic(f"{group}-store-changelog", 2)
        _sleep(wire, 1.0)
        j = _join(group, "m1", _topology(source, group))
        j.user_endpoint = _Req.Endpoint(host="app-host", port=7070)
        r = wire.send(j)

        def fields(resp) -> dict:
            return {"heartbeat": resp.heartbeat_interval_ms, "task offsets": resp.task_offset_interval_ms,
                    "recovery lag": resp.acceptable_recovery_lag,
                    "description required": resp.topology_description_required,
                    "endpoint epoch": resp.endpoint_information_epoch,
                    "endpoints": None if resp.partitions_by_user_endpoint is None else [
                        (e.user_endpoint.host, e.user_endpoint.port,
                         [(tp.topic, sorted(tp.partitions)) for tp in e.active_partitions],
                         [(tp.topic, sorted(tp.partitions)) for tp in e.standby_partitions])
                        for e in e_sorted(resp.partitions_by_user_endpoint)]}

        def e_sorted(entries):
            return sorted(entries, key=lambda e: (e.user_endpoint.host, e.user_endpoint.port))

        seen["join"] = fields(r)
        epoch_seen = r.endpoint_information_epoch
        for i in range(3):
            b = _beat(group, "m1", r.member_epoch, _active(r) or {})
            b.endpoint_information_epoch = epoch_seen
            r = wire.send(b)
            seen[f"beat {i}"] = fields(r)
            epoch_seen = r.endpoint_information_epoch
        v0 = wire.send(_beat(group, "m1", r.member_epoch, {"0": [0, 1]}), 0)
        seen["v0 recovery lag legacy"] = v0.acceptable_recovery_lag_legacy
        for version, include in ((0, False), (1, False), (1, True)):
            req = StreamsGroupDescribeRequest(group_ids=[group], include_authorized_operations=True,
                                              include_topology_description=include)
            g = wire.send(req, version).groups[0]
            seen[f"describe v{version} {include}"] = {
                "assignor": g.assignor_name if version >= 1 else None,
                "description status": g.topology_description_status if version >= 1 else None,
                "operations": g.authorized_operations,
                "user endpoint": [(m.user_endpoint.host, m.user_endpoint.port) if m.user_endpoint else None
                                  for m in g.members],
                "assignment": [sorted((t.subtopology_id, sorted(t.partitions)) for t in m.assignment.active_tasks)
                               for m in g.members],
                "target": [sorted((t.subtopology_id, sorted(t.partitions)) for t in m.target_assignment.active_tasks)
                           for m in g.members]}
    finally:
        wire.close()
    return seen


def standby_probe(bootstrap: str) -> dict:
    """streams.num.standby.replicas=1 on the group, two processes: active and standby tasks as the
    members reconcile (standbys of a stateful subtopology only, never on the active's process)."""
    from kafkapy.protocol.messages import IncrementalAlterConfigsRequest

    run = uuid.uuid4().hex[:6]
    source, group = f"probe-in-{run}", f"probe-app-{run}"
    seen: dict = {}
    wire = _coordinator_wire(bootstrap, group)

    def tasks(resp) -> dict | None:
        if resp.active_tasks is None:
            return None
        return {role: {t.subtopology_id: sorted(t.partitions) for t in getattr(resp, f"{role}_tasks")}
                for role in ("active", "standby", "warmup")}

    def beat(member: str, resp, held: dict) -> object:
        req = _beat(group, member, resp.member_epoch, held.get("active", {}))
        req.standby_tasks = [_Req.TaskIds(subtopology_id=s, partitions=p) for s, p in held.get("standby", {}).items()]
        req.warmup_tasks = [_Req.TaskIds(subtopology_id=s, partitions=p) for s, p in held.get("warmup", {}).items()]
        return wire.send(req)

    try:
        wire.create_topic(source, 2)
        wire.create_topic(f"{group}-store-changelog", 2)
        R = IncrementalAlterConfigsRequest
        wire.send(R(resources=[R.AlterConfigsResource(resource_type=32, resource_name=group, configs=[
            R.AlterableConfig(name="streams.num.standby.replicas", config_operation=0, value="1")])],
            validate_only=False), 1)
        _sleep(wire, 1.0)
        topology = _topology(source, group)
        r1 = wire.send(_join(group, "m1", topology, process="p1"))
        held1 = tasks(r1) or {}
        seen["m1 alone"] = held1
        r2 = wire.send(_join(group, "m2", topology, process="p2"))
        held2 = tasks(r2) or {}
        steps = []
        for _ in range(6):
            r1 = beat("m1", r1, held1)
            held1 = tasks(r1) or held1
            r2 = beat("m2", r2, held2)
            held2 = tasks(r2) or held2
            steps.append((held1, held2))
        seen["steps"] = steps
        seen["final"] = (held1, held2)
    finally:
        wire.close()
    return seen
