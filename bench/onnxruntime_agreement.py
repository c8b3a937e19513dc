#!/usr/bin/env python3
"""Top-1 agreement between hourglass and ONNX Runtime (CPU provider) on the Fashion-MNIST test
set: for each (hourglass model, ONNX file) pair, `hourglass predict MODEL` on the test images
written as PNG files, against ONNX Runtime on the same pixels normalised as hourglass does
((p / 255 - 0.2860) / 0.3530). Prints one markdown row per pair: agreement, both accuracies.

    python3 bench/onnxruntime_agreement.py --hourglass build-device/hourglass \
        --data DIR --pair final.safetensors final.onnx --pair m.int8.safetensors m.int8.onnx
"""
import argparse
import gzip
import json
import os
import subprocess
import tempfile

import numpy as np
import onnxruntime as ort
from PIL import Image


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hourglass", required=True)
    ap.add_argument("--data", required=True, help="folder with t10k-*-idx*-ubyte.gz")
    ap.add_argument("--pair", nargs=2, action="append", required=True, metavar=("MODEL", "ONNX"))
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args()
    raw = gzip.open(os.path.join(a.data, "t10k-images-idx3-ubyte.gz")).read()[16:]
    labels = np.frombuffer(gzip.open(os.path.join(a.data, "t10k-labels-idx1-ubyte.gz")).read()[8:],
                           dtype=np.uint8)
    pixels = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 28, 28)
    x = ((pixels.astype(np.float32) / 255 - np.float32(0.2860)) / np.float32(0.3530))
    x = x[:, None, :, :].astype(np.float32)
    with tempfile.TemporaryDirectory() as d:
        for i, p in enumerate(pixels):
            Image.fromarray(p).save(os.path.join(d, f"{i:05d}.png"))
        print("| model | ONNX file | images | top-1 agreement | hourglass accuracy | ONNX Runtime accuracy |")
        print("| --- | --- | --- | --- | --- | --- |")
        for model, onnx_file in a.pair:
            out = subprocess.run([a.hourglass, "predict", model, d, "--json", "--batch", "500",
                                  "--device", a.device, "--log-level", "warn"],
                                 check=True, capture_output=True, text=True).stdout
            images = json.loads(out)["images"]
            ours = np.array([im["top"][0]["class"] for im in images])
            sess = ort.InferenceSession(onnx_file, providers=["CPUExecutionProvider"])
            xs = x.astype(np.float16) if sess.get_inputs()[0].type == "tensor(float16)" else x
            theirs = np.concatenate([
                sess.run(["logits"], {"input": xs[i:i + 500]})[0].argmax(1)
                for i in range(0, len(xs), 500)])
            print(f"| {os.path.basename(model)} | {os.path.basename(onnx_file)} | {len(ours)} | "
                  f"{100 * np.mean(ours == theirs):.2f}% | {100 * np.mean(ours == labels):.2f}% | "
                  f"{100 * np.mean(theirs == labels):.2f}% |")


if __name__ == "__main__":
    main()
