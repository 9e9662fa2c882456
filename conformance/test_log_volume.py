"""Hostile input cannot fill the broker's log: warnings about one peer are rate limited
(log_throttle.py): the first few are written one by one, the rest counted into one aggregate line
per peer and minute (and at shutdown)."""
from __future__ import annotations

import random
import re
import socket
import struct

from conformance.broker_process import start_broker
from conformance.kafka_wire import RawConnection, api_versions_request, frame

BAD_FRAMES = 1000
AGGREGATE = re.compile(r"WARNING (\d+) more warnings about connections from 127\.0\.0\.1 .*\((\d+) logged\)")


def _send_bad(bootstrap: str, i: int) -> None:
    conn = RawConnection(bootstrap, timeout=5.0)
    try:
        if i % 2:
            conn.send(struct.pack(">i", -1 - i) + bytes(16))  # size outside 0..socket.request.max.bytes
        else:
            conn.send(frame(random.Random(i).randbytes(64)))  # garbage request header and body
        conn.wait_closed(5.0)
    except (ConnectionResetError, BrokenPipeError, socket.timeout):
        pass
    finally:
        conn.close()


def test_thousand_malformed_frames_write_few_log_lines():
    broker = start_broker()
    try:
        for i in range(BAD_FRAMES):
            _send_bad(broker.bootstrap, i)
        with RawConnection(broker.bootstrap) as ok:  # still serving
            ok.roundtrip(api_versions_request(0, correlation_id=1))
        broker.stop()  # the pending aggregate line is written at shutdown
        lines = [line for line in broker.log_path.read_text().splitlines()
                 if "WARNING" in line or "ERROR" in line]
        aggregates = [m for line in lines if (m := AGGREGATE.search(line))]
        individual = [line for line in lines if "closing connection from 127.0.0.1" in line
                      and not AGGREGATE.search(line)]
        print(f"{BAD_FRAMES} malformed frames: {len(lines)} warning lines "
              f"({len(individual)} one by one, {len(aggregates)} aggregate)")
        assert len(lines) < 20, "\n".join(lines)
        suppressed = sum(int(m.group(1)) for m in aggregates)
        assert len(individual) + suppressed == BAD_FRAMES
        assert all(int(m.group(2)) == len(individual) for m in aggregates[:1])
    finally:
        broker.close()
