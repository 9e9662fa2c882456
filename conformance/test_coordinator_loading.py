"""A restarted broker loads __consumer_offsets without blocking: ApiVersions, Metadata and
Produce to another topic are answered at once, group requests get COORDINATOR_LOAD_IN_PROGRESS (14) until the load is applied, and then
the committed offsets, as Kafka's GroupCoordinator does. The 1,000,000-commit version of this
is bench/groups/offsets_load.py.
"""
from __future__ import annotations

import time

import pytest

from conformance.broker_process import start_broker
from conformance.coordinator_loading import fill_offsets, observe_load
from conformance.kafka_wire import (RawConnection, encode_batch, metadata_request, parse_produce_v3,
                                    produce_request_v3)
from conformance.test_groups_tools import create_topic

GROUPS = 1000
PARTITIONS = 100  # 100,000 offset-commit records


@pytest.mark.timeout(120)
def test_offsets_load_does_not_block_the_loop() -> None:
    with start_broker(overrides={"offsets.topic.num.partitions": "1",
                                 "group.initial.rebalance.delay.ms": "0"}) as broker:
        create_topic(broker.bootstrap, "loaded", PARTITIONS)
        create_topic(broker.bootstrap, "other", 1)
        assert fill_offsets(broker.bootstrap, "loaded", GROUPS, PARTITIONS) == GROUPS * PARTITIONS
        broker.stop()
        started = time.monotonic()
        broker.start()
        probe = GROUPS - 1  # committed last: found only once the whole partition is read
        answers = {}

        def other_requests() -> None:
            # requests that do not touch the loading partition are served meanwhile
            with RawConnection(broker.bootstrap, timeout=5) as conn:
                answers["metadata"] = conn.roundtrip(metadata_request(1, 1, ["other"]))
                batch = encode_batch([(b"k", b"during the load")])
                answers["produce"] = parse_produce_v3(conn.roundtrip(produce_request_v3(2, "other", 0, batch)))

        seen = observe_load(broker.bootstrap, f"load-group-{probe}", "loaded", 7, started, timeout=90,
                            while_loading=other_requests)
        assert seen.other_errors == [], seen.other_errors
        assert seen.committed == 1000 + 7
        # the loop answered ApiVersions while it loaded, and group requests were told to wait
        assert seen.first_api_versions is not None and seen.first_api_versions < seen.offsets_ready
        assert seen.load_in_progress_answers > 0
        assert seen.while_loading_confirmed, "the other requests were not answered during the load"
        assert answers["metadata"] and [r.error_code for r in answers["produce"][1]] == [0]
        during = seen.rtts_during_load()
        assert len(during) >= 10
        # a request waits for at most a chunk of records (a few ms), never for the whole load
        assert max(during) < 0.5, sorted(during)[-5:]
        log_text = broker.log_path.read_text(errors="replace")
        assert "__consumer_offsets-0: loaded in" in log_text
