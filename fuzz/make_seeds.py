#!/usr/bin/env python3
"""Writes the fuzzers' seed corpus, fuzz/corpus/<target>/, from the formats' definitions.

Small valid files of each format (and a few near-misses) give libFuzzer a start past the magic
numbers and checksums. The seeds are committed; rerun this only to change them:
    python3 fuzz/make_seeds.py
"""
import gzip
import json
import os
import shutil
import struct
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")


def put(target, name, data):
    folder = os.path.join(CORPUS, target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


# ---- safetensors: the first byte of an input picks verify (odd) or skip (even) ----
def safetensors(tensors, metadata=None, whole_file_crc=True):
    """tensors: list of (name, dtype, shape, raw bytes). Mirrors the hourglass writer: with
    whole_file_crc the CRC32 of the whole file, digits read as zeros, is stored first."""
    header = {}
    if whole_file_crc:
        header["__metadata__"] = {"hourglass.file_crc32": "00000000"}
        header["__metadata__"].update(metadata or {})
    elif metadata:
        header["__metadata__"] = dict(metadata)
    offset = 0
    data = b""
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    prefix = struct.pack("<Q", len(text))
    if whole_file_crc:
        crc = zlib.crc32(prefix + text + data)
        text = text.replace(b"00000000", b"%08x" % crc, 1)
    return prefix + text + data


weights = [("conv.weight", "F32", [2, 1, 3, 3], struct.pack("<18f", *[i / 7 for i in range(18)])),
           ("bn.running_mean", "F32", [2], struct.pack("<2f", 0.5, -0.5)),
           ("step", "I64", [], struct.pack("<q", 42))]
meta = {"hourglass.kind": "checkpoint", "hourglass.epoch": "3"}
for verify in (0, 1):
    put("safetensors", f"whole_file_crc_{verify}", bytes([verify]) + safetensors(weights, meta))
data_only = [(n, d, s, r) for n, d, s, r in weights]
raw = b"".join(r for _, _, _, r in data_only)
put("safetensors", "data_crc_1",
    b"\x01" + safetensors(data_only, {"hourglass.crc32": "%08x" % zlib.crc32(raw)}, False))
put("safetensors", "foreign_0",
    b"\x00" + safetensors([("w", "BF16", [4], b"\x80\x3f" * 4), ("h", "F16", [1, 2], b"\x00\x3c" * 2),
                           ("u", "U8", [3], b"\x01\x02\x03"), ("b", "I8", [1], b"\xff"), ("d", "F64", [1], struct.pack("<d", 2.5)), ("i", "I32", [1], b"\x01\x00\x00\x00")], None, False))
put("safetensors", "empty_0", b"\x00" + safetensors([], None, False))

# ---- IDX: 2-byte little-endian label-file length, label file, image file ----
def idx(magic, dims, payload):
    return struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in dims) + payload


labels = idx(0x801, [3], bytes([1, 7, 9]))
images = idx(0x803, [3, 4, 5], bytes(range(60)))
put("idx", "plain", struct.pack("<H", len(labels)) + labels + images)
gz_labels = gzip.compress(labels, mtime=0)
put("idx", "gzip", struct.pack("<H", len(gz_labels)) + gz_labels + gzip.compress(images, mtime=0))
put("idx", "label_out_of_range", struct.pack("<H", len(labels)) + idx(0x801, [3], bytes([1, 10, 2])) + images)

# ---- CIFAR-10: records of 1 label byte and 3072 planar pixel bytes ----
record = lambda label, seed: bytes([label]) + bytes((seed * 31 + i) % 256 for i in range(3072))
put("cifar10", "two_records", record(3, 1) + record(9, 2))
put("cifar10", "one_record_cut", record(0, 3)[:2000])

# ---- config: the shipped configs, and keys at their edges ----
configs = os.path.join(HERE, "..", "configs")
os.makedirs(os.path.join(CORPUS, "config"), exist_ok=True)
for name in sorted(os.listdir(configs)):
    if name.endswith(".toml"):
        shutil.copy(os.path.join(configs, name), os.path.join(CORPUS, "config", name))
put("config", "edges.toml", b"""name = "edges"
seed = 7
threads = 1
device = "cpu"
precision = "fp32"
[model]
name = "mlp"
[data]
dataset = "synthetic"
workers = 0
[optim]
name = "adamw"
lr = 1e-3
momentum = 0.0
weight_decay = 0.0
[schedule]
name = "cosine"
warmup_epochs = 0.5
[train]
epochs = 1
batch_size = 8
micro_batch = "auto"
clip_grad_norm = 1.0
[checkpoint]
every_epochs = 1
keep = 2
[budget]
hours = 1.5
price_per_hour = 0.85
flush_every = "5s"
""")

# ---- budget ledger ----
session = {"id": "s1", "run": "quickstart", "phase": "full", "started": "2026-11-30T10:00:00Z",
           "ended": "2026-11-30T11:00:00Z", "closed": True, "devices": 1, "price_per_hour": 0.85,
           "wall_seconds": 3600.0, "device_seconds": 3600.0, "stop_reason": "finished"}
ledger = {"format": "hourglass-budget-ledger", "version": 1,
          "budget": {"device_hours": 200.0, "usd": 0.0},
          "totals": {"device_seconds": 3600.0, "device_hours": 1.0, "usd": 0.85, "sessions": 2},
          "sessions": [session, dict(session, id="s2", closed=False, stop_reason="")]}
put("ledger", "two_sessions.json", json.dumps(ledger, indent=2).encode())
put("ledger", "empty.json", json.dumps(dict(ledger, sessions=[], totals={})).encode())

# ---- image pack index (data/image_pack.h): little-endian, CRC32 of everything before it ----
def pack_index(classes, shards, records):
    """shards: list of (size, crc32); records: list of (shard, offset, length, label)."""
    out = b"HGPACK01" + struct.pack("<IIQI", 1, len(classes), len(records), len(shards))
    for name in classes:
        out += struct.pack("<I", len(name)) + name
    for size, crc in shards:
        out += struct.pack("<QI", size, crc)
    for rec in records:
        out += struct.pack("<IQII", *rec)
    return out + struct.pack("<I", zlib.crc32(out))


put("image_pack", "two_shards.hgpack",
    pack_index([b"cat", b"dog"], [(100, 7), (50, 9)], [(0, 0, 60, 1), (0, 60, 40, 0), (1, 10, 40, 1)]))
put("image_pack", "one_record.hgpack", pack_index([b"n01440764"], [(10, 0)], [(0, 0, 10, 0)]))
put("image_pack", "bad_crc.hgpack", pack_index([b"a"], [(5, 0)], [(0, 0, 5, 0)])[:-1] + b"\0")
