"""Fetch contexts (Kafka's FetchManager.newContext): sessionless, full, incremental and error."""
from __future__ import annotations

from dataclasses import dataclass

from kafkapy.broker.fetch_sessions import FINAL_EPOCH, INITIAL_EPOCH, FetchSessionCache
from kafkapy.protocol.errors import ErrorCode


@dataclass
class Want:
    topic: str
    partition: int
    fetch_offset: int = 0
    max_bytes: int = 1024


@dataclass
class Answer:
    error_code: int = 0
    records: bytes = b""
    high_watermark: int = 0
    log_start_offset: int = 0


def resume(key, state):
    return Want(key[0], key[1], state.fetch_offset, state.max_bytes)


def test_sessionless_and_follower_fetches_read_what_they_name():
    cache = FetchSessionCache()
    for session_id, epoch, follower in ((0, FINAL_EPOCH, False), (0, INITIAL_EPOCH, True)):
        context, wanted = cache.new_context(session_id, epoch, [Want("t", 0)], [], follower, resume)
        assert context.session is None and context.session_id == 0 and not context.error
        assert [w.partition for w in wanted] == [0]
        assert context.include(("t", 0), Answer())
    assert len(cache) == 0


def test_incremental_fetch_reads_the_session_and_answers_only_news():
    cache = FetchSessionCache()
    full, wanted = cache.new_context(0, INITIAL_EPOCH, [Want("t", 0), Want("t", 1)], [], False, resume)
    assert full.full and full.session_id > 0 and len(wanted) == 2
    assert all(full.include(("t", p), Answer(high_watermark=5)) for p in (0, 1))
    # the next request names only partition 1's new offset and forgets nothing
    incremental, wanted = cache.new_context(full.session_id, 1, [Want("t", 1, fetch_offset=3)], [], False, resume)
    assert not incremental.full and [(w.partition, w.fetch_offset) for w in wanted] == [(0, 0), (1, 3)]
    assert not incremental.include(("t", 0), Answer(high_watermark=5))  # nothing new
    assert incremental.include(("t", 1), Answer(high_watermark=6))
    assert incremental.include(("t", 0), Answer(error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER, high_watermark=5))
    forgetting, wanted = cache.new_context(full.session_id, 2, [], [("t", 0)], False, resume)
    assert [w.partition for w in wanted] == [1]


def test_answered_keeps_every_partition_without_a_session_and_only_news_in_one():
    cache = FetchSessionCache()
    sessionless, _ = cache.new_context(0, FINAL_EPOCH, [Want("t", 0)], [], False, resume)
    results = [(Want("t", 0), Answer()), (Want("t", 1), Answer())]
    assert sessionless.answered(results) is results  # nothing to remember, nothing left out
    full, _ = cache.new_context(0, INITIAL_EPOCH, [Want("t", 0), Want("t", 1)], [], False, resume)
    assert len(full.answered([(Want("t", p), Answer(high_watermark=5)) for p in (0, 1)])) == 2
    incremental, _ = cache.new_context(full.session_id, 1, [], [], False, resume)
    kept = incremental.answered([(Want("t", 0), Answer(high_watermark=5)), (Want("t", 1), Answer(high_watermark=7))])
    assert [w.partition for w, _ in kept] == [1]


def test_a_wrong_session_id_or_epoch_is_an_error_context():
    cache = FetchSessionCache()
    context, wanted = cache.new_context(0, 3, [Want("t", 0)], [], False, resume)
    assert context.error == ErrorCode.INVALID_FETCH_SESSION_EPOCH and wanted == []
    context, _ = cache.new_context(12345, 1, [], [], False, resume)
    assert context.error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    full, _ = cache.new_context(0, INITIAL_EPOCH, [Want("t", 0)], [], False, resume)
    context, _ = cache.new_context(full.session_id, 7, [], [], False, resume)
    assert context.error == ErrorCode.INVALID_FETCH_SESSION_EPOCH
