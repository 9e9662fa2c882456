"""ZooKeeper's wire format (jute) as the in-memory ZooKeeper server needs it: op and error codes,
watch events, the fixed layouts, and a reader and writers for jute fields. No sockets, no state."""
from __future__ import annotations

import struct

# op codes (ZooDefs.OpCode)
OP_NOTIFICATION, OP_CREATE, OP_DELETE, OP_EXISTS, OP_GET_DATA, OP_SET_DATA = 0, 1, 2, 3, 4, 5
OP_GET_ACL, OP_SET_ACL, OP_GET_CHILDREN, OP_SYNC, OP_PING, OP_GET_CHILDREN2 = 6, 7, 8, 9, 11, 12
OP_CHECK, OP_MULTI, OP_CREATE2, OP_AUTH, OP_SET_WATCHES, OP_SASL = 13, 14, 15, 100, 101, 102
OP_CLOSE, OP_ERROR = -11, -1

# error codes (KeeperException.Code)
OK, RUNTIME_INCONSISTENCY, MARSHALLING_ERROR, UNIMPLEMENTED, BAD_ARGUMENTS = 0, -2, -5, -6, -8
NO_NODE, BAD_VERSION, NO_CHILDREN_FOR_EPHEMERALS, NODE_EXISTS, NOT_EMPTY = -101, -103, -108, -110, -111
SESSION_EXPIRED, INVALID_ACL = -112, -114

# watch event types and the connected state (Watcher.Event)
EVENT_CREATED, EVENT_DELETED, EVENT_CHANGED, EVENT_CHILD = 1, 2, 3, 4
STATE_SYNC_CONNECTED = 3
WATCH_XID, PING_XID = -1, -2

INT = struct.Struct("!i")
LONG = struct.Struct("!q")
REPLY_HEADER = struct.Struct("!iqi")
MULTI_HEADER = struct.Struct("!iBi")
STAT = struct.Struct("!qqqqiiiqiiq")


class JuteReader:
    """Reads jute fields from one request frame."""

    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes, pos: int = 0):
        self.buf = buf
        self.pos = pos

    def int(self) -> int:
        value = INT.unpack_from(self.buf, self.pos)[0]
        self.pos += 4
        return value

    def long(self) -> int:
        value = LONG.unpack_from(self.buf, self.pos)[0]
        self.pos += 8
        return value

    def bool(self) -> bool:
        if self.pos >= len(self.buf):
            raise struct.error("no byte left")
        value = self.buf[self.pos] != 0
        self.pos += 1
        return value

    def buffer(self) -> bytes | None:
        length = self.int()
        if length < 0:
            return None
        if self.pos + length > len(self.buf):
            raise struct.error("buffer runs past the frame")
        value = self.buf[self.pos:self.pos + length]
        self.pos += length
        return bytes(value)

    def string(self) -> str:
        raw = self.buffer()
        return "" if raw is None else raw.decode("utf-8")

    def strings(self) -> list[str]:
        count = self.int()
        return [self.string() for _ in range(max(count, 0))]

    def acl(self) -> list[tuple[int, str, str]]:
        count = self.int()
        return [(self.int(), self.string(), self.string()) for _ in range(max(count, 0))]


def jute_string(value: str) -> bytes:
    raw = value.encode("utf-8")
    return INT.pack(len(raw)) + raw


def jute_buffer(value: bytes | None) -> bytes:
    return INT.pack(-1) if value is None else INT.pack(len(value)) + value
