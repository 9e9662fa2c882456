"""keyless_record_indexes: the produce-time key check of compacted topics.

It must agree with the full record decoder on every well-formed batch (any codec, keys and
values null or not, headers), and fail only with CorruptRecordError on mangled record bytes.
"""
from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.protocol.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD
from kafkapy.protocol.errors import CorruptRecordError
from kafkapy.protocol.records import (
    HEADER_SIZE, build_batch, iter_records, keyless_record_indexes, read_batch_header, validate_batch,
)

blobs = st.one_of(st.none(), st.binary(max_size=300))
records = st.lists(st.tuples(blobs, blobs, st.lists(st.tuples(st.text(max_size=5), blobs), max_size=2)),
                   max_size=40)


@settings(max_examples=150, deadline=None)
@given(records, st.sampled_from([NONE, GZIP, SNAPPY, LZ4, ZSTD]))
def test_agrees_with_the_record_decoder(recs, codec: int) -> None:
    batch = build_batch(recs, compression=codec)
    header = validate_batch(batch)
    expected = [i for i, record in enumerate(iter_records(batch, header)) if record.key is None]
    assert keyless_record_indexes(batch, header) == expected


def test_large_varints_and_a_batch_inside_a_bigger_buffer() -> None:
    recs = [(b"k" * 70_000, b"v" * 200), (None, b"x" * 20_000), (b"", None)]
    batch = build_batch(recs, base_timestamp=0) + build_batch([(None, None)])
    first = read_batch_header(batch, 0)
    second = read_batch_header(batch, first.size)
    assert keyless_record_indexes(batch, first) == [1]
    assert keyless_record_indexes(batch, second) == [0]


def test_mangled_records_raise_corrupt_record_error_only() -> None:
    rng = random.Random(1507)
    base = bytearray(build_batch([(b"key", b"value"), (None, b"v" * 150), (b"k2", None)]))
    for _ in range(3000):
        mutated = bytearray(base)
        for _ in range(rng.randint(1, 4)):
            mutated[rng.randrange(HEADER_SIZE, len(mutated))] = rng.randrange(256)
        if rng.random() < 0.3:
            del mutated[rng.randrange(HEADER_SIZE, len(mutated)):]
        header = read_batch_header(bytes(base))  # the header as sent: lengths may now lie
        try:
            keyless_record_indexes(bytes(mutated), header)
        except CorruptRecordError:
            pass
