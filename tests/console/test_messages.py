"""The message browser's reading and decoding (kafkapy/console/messages.py) over a real
PartitionLog: bounded pages, search in keys/values/headers, compressed and control batches."""
from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkapy.console import messages as msgs
from kafkapy.log.partition_log import PartitionLog
from kafkapy.protocol.records import build_batch

BASE_TS = 1_700_000_000_000


@pytest.fixture
def plog(tmp_path):
    log = PartitionLog.open(tmp_path / "t-0")
    # 3 batches of 10 records, the second gzip-compressed, timestamps a minute apart per batch
    for b in range(3):
        records = [(f"k{b * 10 + i}".encode(), json.dumps({"n": b * 10 + i}).encode(),
                    [("trace", f"t-{b * 10 + i}".encode())], BASE_TS + b * 60_000) for i in range(10)]
        log.append(bytearray(build_batch(records, base_timestamp=BASE_TS + b * 60_000, compression=1 if b == 1 else 0)))
    log.append(bytearray(build_batch([], is_control=True, base_timestamp=BASE_TS + 200_000,
                                     records_payload=b"", last_offset_delta=0)))
    log.high_watermark = log.log_end_offset
    yield log
    log.close()


def test_page_from_an_offset_spans_batches(plog):
    page = msgs.read_page(plog, 7, 6)
    assert [r.offset for r in page.records] == [7, 8, 9, 10, 11, 12]
    assert page.next_offset == 13 and page.log_end == 31


def test_page_stops_at_the_high_watermark_and_skips_control_batches(plog):
    page = msgs.read_page(plog, 25, 50)
    assert [r.offset for r in page.records] == [25, 26, 27, 28, 29]
    assert page.next_offset == 31
    plog.high_watermark = 12
    assert [r.offset for r in msgs.read_page(plog, 10, 50).records] == [10, 11]


def test_search_in_key_value_and_headers(plog):
    assert [r.offset for r in msgs.read_page(plog, 0, 50, "k15").records] == [15]
    assert [r.offset for r in msgs.read_page(plog, 0, 50, '"n": 22').records] == [22]
    assert [r.offset for r in msgs.read_page(plog, 0, 50, "T-3").records] == [3]  # case-insensitive
    assert [r.offset for r in msgs.read_page(plog, 0, 2, "t-2").records] == [2, 20]
    assert msgs.read_page(plog, 0, 50, "absent").records == []


def test_search_is_bounded(plog, monkeypatch):
    monkeypatch.setattr(msgs, "MAX_SCAN_RECORDS", 10)
    page = msgs.read_page(plog, 0, 50, "k25")
    assert page.records == [] and page.scan_limited and page.next_offset < 31


def test_start_by_timestamp_offset_and_end(plog):
    assert msgs.start_offset(plog, timestamp_ms=BASE_TS + 30_000) == 10
    assert msgs.start_offset(plog, timestamp_ms=BASE_TS + 10**9) == plog.high_watermark
    assert msgs.start_offset(plog, offset=-5) == 0 and msgs.start_offset(plog, offset=99) == 31
    assert msgs.start_offset(plog, from_end=5) == 26


@pytest.mark.parametrize("data,fmt,expected", [
    (b'{"a":1}', "auto", ("json", '{\n  "a": 1\n}')),
    (b"plain text", "auto", ("text", "plain text")),
    (b"\x00\xff", "auto", ("hex", "00 ff")),
    (b"a\x01b", "auto", ("hex", "61 01 62")),
    (b'{"a":1}', "hex", ("hex", "7b 22 61 22 3a 31 7d")),
    (b"not json", "json", ("hex", "6e 6f 74 20 6a 73 6f 6e")),
    (b"\x01", "text", ("text", "\x01")),
    (None, "auto", ("null", "null")),
])
def test_decode(data, fmt, expected):
    assert msgs.decode(data, fmt) == expected


@given(st.binary(max_size=64), st.sampled_from(msgs.FORMATS))
def test_decode_never_raises(data, fmt):
    kind, text = msgs.decode(data, fmt)
    assert kind in ("json", "text", "hex") and isinstance(text, str)


def test_export_record_keeps_binary_as_base64(plog):
    record = msgs.read_page(plog, 3, 1).records[0]
    out = msgs.export_record("t", 0, record)
    assert out == {"topic": "t", "partition": 0, "offset": 3, "timestamp": BASE_TS, "key": "k3",
                   "value": '{"n": 3}', "headers": [{"key": "trace", "value": "t-3"}]}
    record.value = b"\xff\x00"
    out = msgs.export_record("t", 0, record)
    assert out["value"] is None and base64.b64decode(out["value_base64"]) == b"\xff\x00"


def test_parse_format():
    assert msgs.parse_format(None) == "auto" and msgs.parse_format("HEX") == "hex"
    with pytest.raises(msgs.ConsoleError) as err:
        msgs.parse_format("xml")
    assert err.value.status == 400


def test_async_read_gives_the_loop_back_between_chunks(plog, monkeypatch):
    import asyncio

    monkeypatch.setattr(msgs, "READ_CHUNK_BYTES", 64)  # one batch per chunk
    ticks = []

    async def main():
        async def ticker():
            while True:
                ticks.append(1)
                await asyncio.sleep(0)

        task = asyncio.ensure_future(ticker())
        page = await msgs.read_page_async(plog, 0, 50, "k2")
        task.cancel()
        return page

    page = asyncio.run(main())
    assert [r.offset for r in page.records] == [2, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29]
    assert len(ticks) >= 3  # the loop ran between the three batches
    assert page == msgs.read_page(plog, 0, 50, "k2")
