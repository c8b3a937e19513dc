#!/usr/bin/env python3
"""Times ONNX models in ONNX Runtime on the CPU (CPU provider): images/s at a batch and batch-1
latency (p50, p99), measured as hourglass bench --inference measures (the median of 3 rounds of
--steps batches; --latency-runs single images). Prints one JSON object per model.

    python3 bench/onnxruntime_cpu_inference.py --threads 16 --batch 64 --size 32 \
        --channels 3 float=final.onnx int8=final.int8.onnx
"""
import argparse
import json
import time

import numpy as np
import onnxruntime as ort


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="+", help="NAME=FILE.onnx")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--size", type=int, default=32)
    ap.add_argument("--channels", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--latency-runs", type=int, default=200)
    a = ap.parse_args()
    x = np.random.default_rng(0).standard_normal(
        (a.batch, a.channels, a.size, a.size)).astype(np.float32)
    for spec in a.models:
        name, path = spec.split("=", 1)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = a.threads
        opts.inter_op_num_threads = 1
        sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
        run = lambda v: sess.run(["logits"], {"input": v})[0]  # noqa: E731
        for _ in range(3):
            run(x)
        rounds = []
        for _ in range(3):
            t0 = time.perf_counter()
            for _ in range(a.steps):
                run(x)
            rounds.append((time.perf_counter() - t0) / a.steps)
        rounds.sort()
        one = x[:1].copy()
        for _ in range(5):
            run(one)
        each = []
        for _ in range(a.latency_runs):
            t0 = time.perf_counter()
            run(one)
            each.append((time.perf_counter() - t0) * 1000)
        each.sort()
        print(json.dumps({"framework": "onnxruntime", "version": ort.__version__, "model": name,
                          "batch": a.batch, "threads": a.threads,
                          "images_per_s": a.batch / rounds[1], "p50_ms": each[len(each) // 2],
                          "p99_ms": each[min(len(each) - 1, int(len(each) * 0.99))]}))


if __name__ == "__main__":
    main()
