#!/usr/bin/env python3
"""Loads `hourglass export --format torch` output into torchvision's ResNet (strict
load_state_dict) and prints the model's logits for a fixed input as JSON: the check that the
exported layout is PyTorch's. Reads safetensors itself (Debian 12 has no python3-safetensors): an
8-byte little-endian header length, a JSON header of dtypes, shapes and offsets, the raw data.

Usage: torch_load_export.py FILE MODEL CLASSES [--input RAW_F32_NCHW --shape N,C,H,W]
"""
import argparse
import json
import struct
import sys

import torch
import torchvision

DTYPES = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64, "I32": torch.int32,
          "BF16": torch.bfloat16, "F16": torch.float16, "U8": torch.uint8}


def load(path):
    with open(path, "rb") as f:
        size = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(size))
        data = f.read()
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        dtype = DTYPES[entry["dtype"]]
        t = torch.frombuffer(bytearray(data[begin:end]), dtype=dtype) if end > begin else \
            torch.empty(0, dtype=dtype)
        out[name] = t.reshape(entry["shape"]).clone()
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("file")
    p.add_argument("model", choices=["resnet18", "resnet34", "resnet50"])
    p.add_argument("classes", type=int)
    p.add_argument("--input", help="raw little-endian f32 images, NCHW")
    p.add_argument("--shape", help="N,C,H,W of --input")
    a = p.parse_args()
    state = load(a.file)
    model = getattr(torchvision.models, a.model)(num_classes=a.classes)
    result = model.load_state_dict(state, strict=True)
    out = {"loaded": len(state), "missing": list(result.missing_keys),
           "unexpected": list(result.unexpected_keys)}
    if a.input:
        shape = [int(v) for v in a.shape.split(",")]
        with open(a.input, "rb") as f:
            x = torch.frombuffer(bytearray(f.read()), dtype=torch.float32).reshape(shape)
        model.eval()
        with torch.no_grad():
            out["logits"] = model(x).tolist()
    json.dump(out, sys.stdout)
    print()


if __name__ == "__main__":
    main()
