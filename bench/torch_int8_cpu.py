#!/usr/bin/python3
"""CPU inference benchmark of PyTorch's own quantised ResNet-18 (Debian's python3-torch and
python3-torchvision): the anchor for hourglass bench --inference on the CPU.

    /usr/bin/python3 bench/torch_int8_cpu.py --batch 64 --threads 2 [--steps 10]
        [--latency-runs 200] [--json]

The model is torchvision's quantisable ResNet-18 with the CIFAR stem (3x3 stride-1 first
convolution, no max-pool), 10 classes: eval mode, conv+bn+relu fused, post-training static
quantisation with the default qconfig of the first quantised engine this torch has of x86,
fbgemm, onednn, qnnpack (Debian's 1.13 has no fbgemm: onednn, oneDNN's int8 kernels,
per-channel s8 weights and u8 activations), calibrated on 8 random batches. Measured like hourglass's bench: the median of
3 rounds of --steps batches, then batch-1 latency p50 and p99 over --latency-runs single images;
fp32 eval of the same model beside it. Prints one JSON object with --json.
"""

import argparse
import json
import os
import sys
import time


def _threads(argv):
    for i, a in enumerate(argv):
        if a == "--threads" and i + 1 < len(argv):
            return argv[i + 1]
    return "2"


_t = _threads(sys.argv[1:])
for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_v, _t)

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
from torchvision.models.quantization import resnet18  # noqa: E402


def cifar_resnet18():
    m = resnet18(weights=None, quantize=False, num_classes=10)
    m.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)
    m.maxpool = nn.Identity()
    return m.eval()


def timed(fn, x, steps, rounds=3, warmup=3):
    with torch.no_grad():
        for _ in range(warmup):
            fn(x)
        per = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            for _ in range(steps):
                fn(x)
            per.append((time.perf_counter() - t0) / steps)
    per.sort()
    return x.shape[0] / per[len(per) // 2]


def latency(fn, x, runs):
    one = x[:1].contiguous()
    with torch.no_grad():
        for _ in range(5):
            fn(one)
        each = []
        for _ in range(runs):
            t0 = time.perf_counter()
            fn(one)
            each.append((time.perf_counter() - t0) * 1000)
    each.sort()
    return each[len(each) // 2], each[min(len(each) - 1, int(len(each) * 0.99))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--latency-runs", type=int, default=200)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    x = torch.randn(a.batch, 3, 32, 32)

    fp32 = cifar_resnet18()
    q = cifar_resnet18()
    q.fuse_model()
    engines = torch.backends.quantized.supported_engines
    backend = next(e for e in ("x86", "fbgemm", "onednn", "qnnpack") if e in engines)
    torch.backends.quantized.engine = backend
    q.qconfig = torch.ao.quantization.get_default_qconfig(backend)
    torch.ao.quantization.prepare(q, inplace=True)
    with torch.no_grad():
        for _ in range(8):
            q(torch.randn(a.batch, 3, 32, 32))
    torch.ao.quantization.convert(q, inplace=True)

    out = {"framework": "pytorch", "version": torch.__version__, "backend": backend,
           "batch": a.batch, "threads": a.threads, "latency_runs": a.latency_runs}
    for name, model in (("eval_fp32", fp32), ("int8", q)):
        ips = timed(model, x, a.steps)
        p50, p99 = latency(model, x, a.latency_runs)
        out[name] = {"images_per_s": ips, "p50_ms": p50, "p99_ms": p99}
    if a.json:
        print(json.dumps(out))
    else:
        for name in ("eval_fp32", "int8"):
            r = out[name]
            print(f"pytorch {name} batch {a.batch}: {r['images_per_s']:.1f} images/s; batch 1: "
                  f"p50 {r['p50_ms']:.3f} ms, p99 {r['p99_ms']:.3f} ms")


if __name__ == "__main__":
    main()
