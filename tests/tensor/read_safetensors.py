#!/usr/bin/python3
"""An independent safetensors reader (standard library only: json + struct), used by
test_safetensors.cpp to check that hourglass writes files another implementation can read.

Usage: read_safetensors.py FILE
Prints one line per tensor, in data-section order, tab-separated:
    name  dtype  shape  sum  weighted_sum
where shape is comma-separated (empty for a scalar), sum is the sum of the values and
weighted_sum is sum((i + 1) * value[i]) over the row-major element order (so a reordering of
elements changes it), both as repr() of a Python float. Then one line per metadata entry:
    meta  key  value
When the metadata holds hourglass's whole-file checksum ("hourglass.file_crc32": a CRC32 of the
whole file with its own 8 hex digits read as zeros, written first in the header), it is checked
independently and a last line says so:
    file_crc32  ok
Exits with status 1 and a message on stderr when the file breaks the format or the checksum.
"""
import json
import struct
import sys
import zlib

CHECKSUM_KEY = "hourglass.file_crc32"
CHECKSUM_START = b'{"__metadata__":{"' + CHECKSUM_KEY.encode() + b'":"'

# dtype -> (struct format character, bytes per element); BF16 is decoded by hand.
FORMATS = {
    "F32": ("f", 4), "F64": ("d", 8), "F16": ("e", 2), "BF16": (None, 2),
    "I8": ("b", 1), "I32": ("i", 4), "I64": ("q", 8), "U8": ("B", 1),
}


def fail(message):
    sys.stderr.write("read_safetensors.py: " + message + "\n")
    sys.exit(1)


def decode(dtype, raw, count):
    fmt, size = FORMATS[dtype]
    if fmt is not None:
        return struct.unpack("<%d%s" % (count, fmt), raw)
    # bfloat16 is the top half of a float32.
    halves = struct.unpack("<%dH" % count, raw)
    return struct.unpack("<%df" % count, struct.pack("<%dI" % count, *[h << 16 for h in halves]))


def main():
    if len(sys.argv) != 2:
        fail("usage: read_safetensors.py FILE")
    with open(sys.argv[1], "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        fail("file shorter than 8 bytes")
    (header_len,) = struct.unpack("<Q", blob[:8])
    if header_len % 8 != 0:
        fail("header length %d is not a multiple of 8" % header_len)
    if 8 + header_len > len(blob):
        fail("header length beyond the file")
    header = json.loads(blob[8:8 + header_len].decode("utf-8"))
    data = blob[8 + header_len:]
    metadata = header.pop("__metadata__", {})

    entries = sorted(header.items(), key=lambda kv: tuple(kv[1]["data_offsets"]))
    position = 0
    for name, info in entries:
        dtype = info["dtype"]
        shape = info["shape"]
        begin, end = info["data_offsets"]
        if dtype not in FORMATS:
            fail("unknown dtype %s" % dtype)
        if begin != position:
            fail("tensor %s starts at %d, expected %d" % (name, begin, position))
        count = 1
        for d in shape:
            count *= d
        if end - begin != count * FORMATS[dtype][1]:
            fail("tensor %s: offsets do not match shape" % name)
        values = decode(dtype, data[begin:end], count)
        total = 0.0
        weighted = 0.0
        for i, v in enumerate(values):
            total += float(v)
            weighted += (i + 1) * float(v)
        print("%s\t%s\t%s\t%r\t%r" % (name, dtype, ",".join(str(d) for d in shape), total, weighted))
        position = end
    if position != len(data):
        fail("data section is %d bytes, tensors cover %d" % (len(data), position))
    for key in sorted(metadata):
        print("meta\t%s\t%s" % (key, metadata[key]))
    if CHECKSUM_KEY in metadata:
        header_bytes = blob[8:8 + header_len]
        if not header_bytes.startswith(CHECKSUM_START):
            fail("%s is not the first metadata entry" % CHECKSUM_KEY)
        at = 8 + len(CHECKSUM_START)
        zeroed = blob[:at] + b"00000000" + blob[at + 8:]
        if "%08x" % zlib.crc32(zeroed) != metadata[CHECKSUM_KEY]:
            fail("%s is %s but the file has %08x" % (CHECKSUM_KEY, metadata[CHECKSUM_KEY],
                                                     zlib.crc32(zeroed)))
        print("file_crc32\tok")


if __name__ == "__main__":
    main()
