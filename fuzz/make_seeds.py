#!/usr/bin/env python3
"""Writes the fuzzers' seed corpus, fuzz/corpus/<target>/, from the formats' definitions.

Small valid files of each format (and a few near-misses) give libFuzzer a start past the magic
numbers and checksums. The seeds are committed; rerun this only to change them:
    python3 fuzz/make_seeds.py
"""
import gzip
import io
import json
import os
import shutil
import struct
import tarfile
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

# ---- CIFAR-10 python version: a pickled dict {data: uint8 ndarray (N, 3072), labels: [...]} ----
def cifar_pickle(labels, pixels, style="py2", reconstruct=("numpy.core.multiarray", "_reconstruct")):
    """The opcode stream of a CIFAR-10 python batch: style "py2" as Python 2's cPickle writes it
    (protocol 2, the published files), "p3" and "p4" as Python 3 re-pickles it (protocols 3, 4)."""
    out = bytearray(b"\x80" + bytes([{"py2": 2, "p3": 3, "p4": 4}[style]]))
    memo = [1 if style == "py2" else 0]

    def put():
        out.extend(b"\x94" if style == "p4" else b"q" + bytes([memo[0]]))
        memo[0] += 1

    def integer(v):
        out.extend(b"K" + bytes([v]) if 0 <= v < 256 else
                   b"M" + struct.pack("<H", v) if 0 <= v < 65536 else b"J" + struct.pack("<i", v))

    def raw(s):  # str in Python 2, bytes in Python 3
        op = (b"U", b"T") if style == "py2" else (b"C", b"B")
        out.extend(op[0] + bytes([len(s)]) if len(s) < 256 else op[1] + struct.pack("<I", len(s)))
        out.extend(s)

    def text(s):
        s = s.encode()
        if style == "py2":
            return raw(s)
        out.extend(b"\x8c" + bytes([len(s)]) if style == "p4" else b"X" + struct.pack("<I", len(s)))
        out.extend(s)

    def glob(module, name):
        if style == "p4":
            text(module), put(), text(name), put()
            out.extend(b"\x93")
        else:
            out.extend(b"c" + module.encode() + b"\n" + name.encode() + b"\n")
        put()

    def flag(v):
        if style == "py2":
            integer(int(v))
        else:
            out.extend(b"\x88" if v else b"\x89")

    out.extend(b"}"), put(), out.extend(b"(")
    text("data"), put(), glob(*reconstruct), glob("numpy", "ndarray")
    integer(0), out.extend(b"\x85"), raw(b"b"), out.extend(b"\x87R"), put()
    out.extend(b"("), integer(1), integer(len(labels)), integer(3072), out.extend(b"\x86")
    glob("numpy", "dtype"), text("u1"), flag(False), flag(True), out.extend(b"\x87R"), put()
    out.extend(b"("), integer(3), text("|"), out.extend(b"NNN"), integer(-1), integer(-1), integer(0)
    out.extend(b"tb"), flag(False), raw(pixels), out.extend(b"tb")
    text("labels"), put(), out.extend(b"]"), put(), out.extend(b"(")
    for label in labels:
        integer(label)
    out.extend(b"e"), text("batch_label"), put(), text("testing batch 1 of 1"), put()
    text("filenames"), put(), out.extend(b"]"), put(), out.extend(b"(")
    for i in range(len(labels)):
        text("img_%d.png" % i), put()
    out.extend(b"eu.")
    if style == "p4":  # one FRAME around everything after PROTO
        out[2:2] = b"\x95" + struct.pack("<Q", len(out) - 2)
    return bytes(out)


one_image = bytes((i * 7) % 256 for i in range(3072))
for style in ("py2", "p3", "p4"):
    put("cifar10_pickle", f"one_image_{style}", cifar_pickle([7], one_image, style))
put("cifar10_pickle", "empty_py2", cifar_pickle([], b""))
put("cifar10_pickle", "label_out_of_range", cifar_pickle([10], one_image))
put("cifar10_pickle", "refused_global", cifar_pickle([1], one_image, "py2", ("os", "system")))

# ---- CIFAR-10 archives given as the path: tar files, plain (to reach the headers) or gzip ----
def tar(members):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as t:
        for name, data in members:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                t.addfile(info)
            else:
                info.size, info.mode = len(data), 0o644
                t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


binary_tar = tar([("cifar-10-batches-bin/", None), ("cifar-10-batches-bin/readme.html", b"hi"),
                  ("cifar-10-batches-bin/test_batch.bin", record(3, 1) + record(9, 2))])
python_tar = tar([("cifar-10-batches-py/", None), ("cifar-10-batches-py/batches.meta", b"\x80\x02}."),
                  ("cifar-10-batches-py/test_batch", cifar_pickle([7], one_image))])
put("cifar10_archive", "binary.tar", binary_tar)
put("cifar10_archive", "python.tar", python_tar)
put("cifar10_archive", "python.tar.gz", gzip.compress(python_tar, mtime=0))
put("cifar10_archive", "no_batch.tar", tar([("other/file", b"abc")]))

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

# ---- image folder: a script of operations (fuzz_image_folder.cpp's build()). An operation is a
# kind byte (0 folder, 1-2 file, 3 folder link, 4 file link, 5 FIFO, 6-7 class folder holding
# a.png), a parent folder byte (index into the folders made so far, 0 the image folder), a name
# (length byte, that many bytes, suffix byte: 0 .jpg 1 .png 4 none 5 .txt) and its arguments ----
def name(text, suffix):
    return bytes([len(text)]) + text + bytes([suffix])


two_classes = (bytes([6, 0]) + name(b"cat", 4) + bytes([6, 0]) + name(b"dog", 4) +
               bytes([1, 1]) + name(b"b", 1) + b"\x00" + bytes([1, 2]) + name(b"c", 0) + b"\x03")
put("image_folder", "two_classes", two_classes)
put("image_folder", "fifo_and_links",
    two_classes + bytes([5, 1]) + name(b"pipe", 0) +          # a FIFO named pipe.jpg in cat
    bytes([4, 2]) + name(b"ln", 1) + bytes([2 + 4 * 2]) +      # dog/ln.png -> a file, absolute
    bytes([3, 1]) + name(b"up", 4) + bytes([1]) +              # cat/up -> ..
    bytes([3, 0]) + name(b"out", 4) + bytes([3]))              # out -> the outside folder
put("image_folder", "odd_names",
    bytes([0, 0]) + name(b"a b\x01\xff", 4) + bytes([1, 1]) + name(b"\x1b[31m\xc3", 0) + b"\x00" +
    bytes([0, 0]) + b"\xff\x05" + bytes([4]) + bytes([0, 0]) + name(b".hidden", 4))

# ---- gzip-compressed CIFAR-10 batches: mode byte (even: the rest is the gzip stream; odd: two
# option bytes, then a plain batch the fuzzer compresses) ----
put("cifar10_gzip", "stream", b"\x00" + gzip.compress(record(3, 1) + record(9, 2), mtime=0))
put("cifar10_gzip", "stream_cut", b"\x00" + gzip.compress(record(4, 5), mtime=0)[:-6])
put("cifar10_gzip", "self_two_records", b"\x01\x06\x00" + record(3, 1) + record(9, 2))
put("cifar10_gzip", "self_two_members", b"\x01\x9b\x86" + record(1, 1) + record(2, 2))
put("cifar10_gzip", "self_at_cap", b"\x01\x01\x07" + record(7, 4))       # 9,999 zero records + 1
put("cifar10_gzip", "self_over_cap", b"\x01\x01\x0f" + record(7, 4))     # 10,000 + 1

# ---- run directory: entries of a slot byte (0 config.toml, 1 metrics.jsonl, 2 steps.jsonl,
# 3 budget.json, 5 monitor.csv, 8 checkpoints/last, 16 checkpoints/step-<n>, 19
# checkpoints/discarded/step-<n>; the step slots take n next), a form byte (0-3 text: a length
# byte and the bytes, 3 the same after '{"epoch": <a byte % 4>, '; 4 a valid checkpoint: position byte
# (epoch = p % 3, batch = p // 3 % 5, 4 steps an epoch) and a fields byte; 5 FIFO; 6 link) ----
def text(slot, data, form=0, epoch=1):
    assert len(data) < 64
    return bytes([slot, form]) + (bytes([epoch]) if form == 3 else b"") + bytes([len(data)]) + data


def ckpt(step, position, fields=0):
    return bytes([16, 4, step, position, fields])


report_files = (text(0, b'name = "r"\nseed = 3\n[train]\nepochs = 2\n') +
                text(1, b'"train_loss": 1.5, "test_acc": 0.5}\n{"epoch": 2, "tr', 3) +
                text(2, b'{"step": 1, "loss": 2.0}\n{"step": 2, "loss": 1.0}\n') +
                text(5, b"time,gpu_util\n1,50\n2,\n"))
put("run_dir", "report", report_files)
put("run_dir", "resume_two", ckpt(0, 0) + ckpt(5, 4, 0x10) + text(1, b'"train_loss": 1}\n', 3))
put("run_dir", "discarded_clash",
    ckpt(0, 0) + bytes([16, 0, 5, 4]) + b"junk" + bytes([19, 0, 5, 3]) + b"old")
put("run_dir", "fifos", ckpt(0, 0) + bytes([1, 5, 2, 5, 8, 5, 3, 5, 0, 5, 16, 5, 3]))
