"""Record compression codecs by Kafka codec id, with bounded decompression.

Codec ids are the values of the compression bits in batch/message attributes:
0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd. The byte formats follow what the Java
client writes, because that is what every other client has learned to read:

- gzip: a gzip member (RFC 1952); concatenated members are read like Java's
  GZIPInputStream does, trailing non-gzip bytes are ignored as Java does.
- snappy: xerial "snappy-java" block framing (16-byte header, then
  [int32 length][raw snappy block]...). Raw snappy without the header, as
  librdkafka writes it, is also accepted.
- lz4: a standard LZ4 frame with independent 64 KiB blocks, no content size and
  no content checksum. Kafka 0.8/0.9 (magic 0) computed the frame descriptor
  checksum over the magic number too; `legacy_lz4_checksum=True` reads and
  writes that broken checksum.
- zstd: one or more zstd frames, with or without content size.

Decompression never returns more than `max_size` bytes and never holds more
than max_size + max(max_size, 32 MiB) (zstd streams are checked chunk by chunk,
see `_decompress_zstd_streaming`), so a small batch cannot expand into memory
exhaustion; garbage and truncation raise CorruptRecordError.
"""
from __future__ import annotations

import struct
import threading
import zlib
from typing import TYPE_CHECKING

from .errors import CorruptRecordError, ErrorCode, KafkaError

# The snappy, lz4 and zstd libraries are imported by the functions that use them: a broker starts
# and answers its first requests without them, and most never see a compressed batch to open.
if TYPE_CHECKING:
    import zstandard

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4

CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
CODECS_BY_NAME = {name: codec for codec, name in CODEC_NAMES.items()}

DEFAULT_MAX_DECOMPRESSED_SIZE = 2 * 1024 * 1024 * 1024

# Kafka's defaults (CompressionType.*.defaultLevel()).
GZIP_DEFAULT_LEVEL = 6
LZ4_DEFAULT_LEVEL = 9  # Java's "default" level selects lz4-java's fast compressor
ZSTD_DEFAULT_LEVEL = 3

XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
XERIAL_MAGIC = XERIAL_HEADER[:8]
XERIAL_BLOCK_SIZE = 32 * 1024
_XERIAL_MAGIC_HEAD = struct.unpack(">i", XERIAL_MAGIC[:4])[0]

LZ4_FRAME_MAGIC = b"\x04\x22\x4d\x18"
LZ4_BLOCK_SIZE = 64 * 1024
_LZ4_FIRST_STEP = 256 * 1024

# Bounds of the input chunk size for streaming zstd decompression (see _decompress_zstd_streaming).
_ZSTD_MIN_INPUT_CHUNK = 1024
_ZSTD_MAX_INPUT_CHUNK = 64 * 1024

_I = struct.Struct(">i")
_U32LE = struct.Struct("<I")



def _codec_errors() -> tuple[type[Exception], ...]:
    """What the codec libraries raise for input they cannot decompress (looked up only when one raises)."""
    import snappy
    import zstandard

    return (zlib.error, EOFError, snappy.UncompressError, RuntimeError, zstandard.ZstdError, ValueError,
            struct.error, OverflowError, TypeError)


class UnsupportedCompressionTypeError(KafkaError):
    """The requested codec cannot be used here (e.g. zstd for a pre-2.1 fetch version)."""

    code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


def codec_name(codec: int) -> str:
    """Kafka's name of a codec id ("none", "gzip", ...)."""
    try:
        return CODEC_NAMES[codec]
    except KeyError:
        raise CorruptRecordError(f"unknown compression codec id {codec}") from None


def compress(codec: int, data, *, level: int | None = None, legacy_lz4_checksum: bool = False) -> bytes:
    """Compress `data` the way the Java client does for codec id `codec`."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        return _compress_gzip(data, GZIP_DEFAULT_LEVEL if level is None else level)
    if codec == SNAPPY:
        return _compress_xerial_snappy(data)
    if codec == LZ4:
        return _compress_lz4(data, level, legacy_lz4_checksum)
    if codec == ZSTD:
        import zstandard

        return zstandard.ZstdCompressor(level=ZSTD_DEFAULT_LEVEL if level is None else level).compress(data)
    raise UnsupportedCompressionTypeError(f"unknown compression codec id {codec}")


def decompress(codec: int, data, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE, *,
               legacy_lz4_checksum: bool = False) -> bytes:
    """Decompress `data` of codec id `codec`, producing at most `max_size` bytes.

    Raises CorruptRecordError if the data does not decode, is truncated, or would
    expand beyond `max_size`.
    """
    try:
        if codec == NONE:
            out = bytes(data)
        elif codec == GZIP:
            out = _decompress_gzip(data, max_size)
        elif codec == SNAPPY:
            out = _decompress_snappy(data, max_size)
        elif codec == LZ4:
            out = _decompress_lz4(data, max_size, legacy_lz4_checksum)
        elif codec == ZSTD:
            out = _decompress_zstd(data, max_size)
        else:
            raise CorruptRecordError(f"unknown compression codec id {codec}")
    except CorruptRecordError:
        raise
    except _codec_errors() as exc:
        raise CorruptRecordError(f"{CODEC_NAMES[codec]} data does not decompress: {exc}") from exc
    if len(out) > max_size:
        raise _too_large(codec, max_size)
    return out


def _too_large(codec: int, max_size: int) -> CorruptRecordError:
    return CorruptRecordError(f"{CODEC_NAMES[codec]} data decompresses to more than {max_size} bytes")


# -- gzip ---------------------------------------------------------------------------------------

def _compress_gzip(data, level: int) -> bytes:
    # zlib with wbits=31 writes a gzip member with mtime 0 and no name: deterministic output.
    compressor = zlib.compressobj(level, zlib.DEFLATED, 31)
    return compressor.compress(data) + compressor.flush()


def _decompress_gzip(data, max_size: int) -> bytes:
    chunks = []
    total = 0
    pending = data
    while True:
        decompressor = zlib.decompressobj(31)
        # Asking for one byte more than allowed tells "exactly max_size" from "too much".
        chunk = decompressor.decompress(pending, max_size - total + 1)
        total += len(chunk)
        if total > max_size:
            raise _too_large(GZIP, max_size)
        chunks.append(chunk)
        if not decompressor.eof:
            raise CorruptRecordError("gzip data truncated")
        pending = decompressor.unused_data
        # Java's GZIPInputStream reads further members and silently stops at anything else.
        if not pending.startswith(b"\x1f\x8b"):
            return b"".join(chunks)


# -- snappy -------------------------------------------------------------------------------------

def _compress_xerial_snappy(data) -> bytes:
    import snappy

    view = memoryview(data)
    parts = [XERIAL_HEADER]
    for start in range(0, len(view), XERIAL_BLOCK_SIZE):
        block = snappy.compress(bytes(view[start : start + XERIAL_BLOCK_SIZE]))
        parts.append(_I.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_raw_length(block) -> int:
    """The uncompressed length a raw snappy block declares in its varint preamble."""
    result = 0
    for i in range(min(len(block), 5)):
        byte = block[i]
        result |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            return result
    raise CorruptRecordError("snappy block has a malformed length preamble")


def _decompress_snappy_block(block, budget: int, max_size: int) -> bytes:
    if _snappy_raw_length(block) > budget:
        raise _too_large(SNAPPY, max_size)
    import snappy

    return snappy.uncompress(bytes(block))


def _decompress_snappy(data, max_size: int) -> bytes:
    view = memoryview(data)
    if bytes(view[:8]) != XERIAL_MAGIC:
        # snappy-java falls back to raw snappy whenever the xerial magic is missing.
        return _decompress_snappy_block(view, max_size, max_size)
    if len(view) < len(XERIAL_HEADER):
        raise CorruptRecordError("xerial snappy header truncated")
    chunks = []
    total = 0
    pos = len(XERIAL_HEADER)
    end = len(view)
    while pos < end:
        if end - pos < 4:
            raise CorruptRecordError("xerial snappy block length truncated")
        (block_len,) = _I.unpack_from(view, pos)
        if block_len == _XERIAL_MAGIC_HEAD:
            # Concatenated xerial streams: snappy-java skips the repeated header.
            if bytes(view[pos : pos + 8]) != XERIAL_MAGIC or end - pos < len(XERIAL_HEADER):
                raise CorruptRecordError("xerial snappy stream has a broken inner header")
            pos += len(XERIAL_HEADER)
            continue
        pos += 4
        if block_len < 0 or block_len > end - pos:
            raise CorruptRecordError(f"xerial snappy block length {block_len} out of range")
        chunk = _decompress_snappy_block(view[pos : pos + block_len], max_size - total, max_size)
        total += len(chunk)
        chunks.append(chunk)
        pos += block_len
    return b"".join(chunks)


# -- lz4 ----------------------------------------------------------------------------------------

def _compress_lz4(data, level: int | None, legacy_checksum: bool) -> bytes:
    import lz4.frame

    # Java's Lz4BlockOutputStream: independent 64 KiB blocks, no content size/checksum.
    frame = lz4.frame.compress(
        data,
        compression_level=0 if level is None or level == LZ4_DEFAULT_LEVEL else level,
        block_size=lz4.frame.BLOCKSIZE_MAX64KB,
        block_linked=False,
        content_checksum=False,
        store_size=False,
    )
    if legacy_checksum:
        # Kafka 0.8/0.9 hashed the magic number into the descriptor checksum (KAFKA-3160).
        frame = bytearray(frame)
        frame[6] = (xxh32(bytes(frame[0:6])) >> 8) & 0xFF
        frame = bytes(frame)
    return frame


def _lz4_descriptor_end(view) -> int:
    """Position of the header-checksum byte of the LZ4 frame starting at 0."""
    if len(view) < 7 or bytes(view[:4]) != LZ4_FRAME_MAGIC:
        raise CorruptRecordError("lz4 data does not start with an LZ4 frame header")
    flags = view[4]
    end = 6
    if flags & 0x08:  # content size present
        end += 8
    if flags & 0x01:  # dictionary id present
        end += 4
    if len(view) <= end:
        raise CorruptRecordError("lz4 frame header truncated")
    return end


def _decompress_lz4(data, max_size: int, legacy_checksum: bool) -> bytes:
    import lz4.frame

    pending = bytes(data)
    if legacy_checksum:
        # Replace the broken checksum with the correct one so lz4 accepts the header.
        hc_pos = _lz4_descriptor_end(pending)
        fixed = bytearray(pending)
        fixed[hc_pos] = (xxh32(pending[4:hc_pos]) >> 8) & 0xFF
        pending = bytes(fixed)
    chunks = []
    total = 0
    while True:
        if not pending.startswith(LZ4_FRAME_MAGIC):
            raise CorruptRecordError("lz4 data does not start with an LZ4 frame header")
        decompressor = lz4.frame.LZ4FrameDecompressor()
        # lz4 allocates max_length up front, so ask for a growing step rather than the
        # whole budget; unread output stays buffered in the decompressor between calls.
        step = max(_LZ4_FIRST_STEP, 4 * len(pending))
        while True:
            chunk = decompressor.decompress(pending, max_length=min(step, max_size - total + 1))
            pending = b""
            total += len(chunk)
            if total > max_size:
                raise _too_large(LZ4, max_size)
            chunks.append(chunk)
            if decompressor.eof:
                break
            if decompressor.needs_input:
                raise CorruptRecordError("lz4 frame truncated")
            step *= 2
        pending = decompressor.unused_data
        if not pending:
            return b"".join(chunks)


_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl32(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    """XXH32 hash; used only for the few bytes of an LZ4 frame descriptor."""
    length = len(data)
    pos = 0
    if length >= 16:
        v1 = (seed + _P1 + _P2) & _M32
        v2 = (seed + _P2) & _M32
        v3 = seed & _M32
        v4 = (seed - _P1) & _M32
        while pos + 16 <= length:
            lanes = struct.unpack_from("<4I", data, pos)
            v1 = (_rotl32((v1 + lanes[0] * _P2) & _M32, 13) * _P1) & _M32
            v2 = (_rotl32((v2 + lanes[1] * _P2) & _M32, 13) * _P1) & _M32
            v3 = (_rotl32((v3 + lanes[2] * _P2) & _M32, 13) * _P1) & _M32
            v4 = (_rotl32((v4 + lanes[3] * _P2) & _M32, 13) * _P1) & _M32
            pos += 16
        h = (_rotl32(v1, 1) + _rotl32(v2, 7) + _rotl32(v3, 12) + _rotl32(v4, 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + length) & _M32
    while pos + 4 <= length:
        (lane,) = _U32LE.unpack_from(data, pos)
        h = (_rotl32((h + lane * _P3) & _M32, 17) * _P4) & _M32
        pos += 4
    while pos < length:
        h = (_rotl32((h + data[pos] * _P5) & _M32, 11) * _P1) & _M32
        pos += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


# -- zstd ---------------------------------------------------------------------------------------

_zstd_state = threading.local()


def _zstd_decompressor() -> zstandard.ZstdDecompressor:
    # Creating a decompression context costs ~10 us; one per thread is reused.
    dctx = getattr(_zstd_state, "dctx", None)
    if dctx is None:
        import zstandard

        dctx = _zstd_state.dctx = zstandard.ZstdDecompressor()
    return dctx


def _decompress_zstd(data, max_size: int) -> bytes:
    import zstandard

    view = memoryview(data)
    if not view:
        raise CorruptRecordError("zstd data is empty")
    # Fast path: one frame that declares its size (librdkafka, Python clients). The declared
    # size bounds the allocation; a lie about it makes zstd fail, and multi-frame input
    # ("unused data") falls through to the streaming path.
    content_size = zstandard.frame_content_size(view)
    if content_size > max_size:
        raise _too_large(ZSTD, max_size)
    if content_size >= 0:
        try:
            return _zstd_decompressor().decompress(view, allow_extra_data=False)
        except zstandard.ZstdError:
            pass
    return _decompress_zstd_streaming(view, max_size)


def _decompress_zstd_streaming(view: memoryview, max_size: int) -> bytes:
    # For frames without a content size (Java's zstd-jni stream) and multi-frame input.
    # decompressobj has no output cap, so input is fed in chunks and the output checked
    # after each; a chunk is sized so that even maximal expansion (a 4-byte RLE block
    # gives 128 KiB) cannot produce more than the remaining budget again.
    chunks = []
    total = 0
    pos = 0
    end = len(view)
    while pos < end:
        decompressor = _zstd_decompressor().decompressobj()
        while pos < end and not decompressor.eof:
            step = min(max(_ZSTD_MIN_INPUT_CHUNK, (max_size - total) >> 15), _ZSTD_MAX_INPUT_CHUNK)
            chunk = decompressor.decompress(view[pos : pos + step])
            pos = min(pos + step, end)
            total += len(chunk)
            if total > max_size:
                raise _too_large(ZSTD, max_size)
            chunks.append(chunk)
        if not decompressor.eof:
            raise CorruptRecordError("zstd frame truncated")
        # Bytes of the last chunk beyond this frame belong to the next frame.
        pos -= len(decompressor.unused_data)
    return b"".join(chunks)


__all__ = [
    "NONE", "GZIP", "SNAPPY", "LZ4", "ZSTD", "CODEC_NAMES", "CODECS_BY_NAME",
    "DEFAULT_MAX_DECOMPRESSED_SIZE", "UnsupportedCompressionTypeError", "codec_name", "compress",
    "decompress", "xxh32",
]
