#!/usr/bin/env python3
"""Kernel time of one training step by kind, hourglass (ncu CSV) against PyTorch (kernel TSV).

usage: summarize_profile.py HG_NCU_CSV PT_KERNELS_TSV
The ncu CSV holds every kernel of a bench run (warm-up and tuning included); the last step is
the kernels between the last two optimizer updates (or, without one, the shortest period p
with the last p kernel names equal to the p before them).
"""
import csv
import re
import sys
from collections import defaultdict

KINDS = [
    ("transpose", r"nhwcToNchw|nchwToNhwc|transpose|Transpose"),
    ("conv fft", r"fft"),
    ("conv winograd", r"winograd|Winograd"),
    ("conv/gemm", r"conv|Conv|gemm|Gemm|sm90_|sm80_|cutlass|xmma|implicit|dgrad|wgrad|cudnn|magma|nvjet|ampere|hopper"),
    ("batch-norm", r"batch_norm|bn_|batchnorm|BatchNorm|welford|Welford"),
    ("optimizer", r"sgd|SGD|adam|Adam|multi_tensor|foreach|momentum|apply_update"),
    ("loss/softmax", r"softmax|cross_entropy|nll|log_softmax|loss"),
    ("reduce", r"reduce|Reduce|sum_|norm"),
    ("fill/copy", r"fill|Fill|copy|Copy|memset|zero"),
    ("elementwise", r"elementwise|vectorized|relu|add|mul|threshold|unrolled|pointwise"),
]


def kind(name):
    for k, pattern in KINDS:
        if re.search(pattern, name):
            return k
    return "other"


def hourglass_step(path):
    names, times = [], []
    with open(path) as f:
        lines = [l for l in f if l.startswith('"')]
    for row in csv.DictReader(lines):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        names.append(row["Kernel Name"])
        times.append(float(row["Metric Value"].replace(",", "")) / 1e3)  # ns -> us
    # A step ends with the optimizer's update: the kernels after the second-to-last update up
    # to and including the last one.
    updates = [i for i, n in enumerate(names) if re.search(r"sgd_kernel|adamw_kernel", n)]
    if len(updates) >= 2:
        a, b = updates[-2] + 1, updates[-1] + 1
        return list(zip(names[a:b], times[a:b]))
    for p in range(50, len(names) // 2 + 1):
        if names[-p:] == names[-2 * p:-p]:
            return list(zip(names[-p:], times[-p:]))
    raise SystemExit(f"{path}: no repeating step found in {len(names)} kernels")


def pytorch_step(path):
    out = []
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) == 3 and re.match(r"^[0-9.]+$", parts[0]):
                out.append((parts[2], float(parts[0])))
    return out


def by_kind(kernels):
    t = defaultdict(float)
    n = defaultdict(int)
    for name, us in kernels:
        t[kind(name)] += us
        n[kind(name)] += 1
    return t, n


def main():
    hg = hourglass_step(sys.argv[1])
    pt = pytorch_step(sys.argv[2])
    ht, hn = by_kind(hg)
    pt_t, _ = by_kind(pt)
    print(f"hourglass: {len(hg)} kernels, {sum(u for _, u in hg) / 1e3:.2f} ms of kernel time; "
          f"PyTorch: {sum(u for _, u in pt) / 1e3:.2f} ms")
    print("\n| kind | hourglass ms (kernels) | PyTorch ms |\n| --- | --- | --- |")
    for k in sorted(set(ht) | set(pt_t), key=lambda k: -max(ht.get(k, 0), pt_t.get(k, 0))):
        print(f"| {k} | {ht.get(k, 0) / 1e3:.2f} ({hn.get(k, 0)}) | {pt_t.get(k, 0) / 1e3:.2f} |")
    agg = defaultdict(lambda: [0.0, 0])
    for name, us in hg:
        agg[name][0] += us
        agg[name][1] += 1
    print("\nhourglass, top kernels (us per step, count):")
    for name, (us, c) in sorted(agg.items(), key=lambda kv: -kv[1][0])[:40]:
        print(f"  {us:9.1f} {c:4d}  {name[:150]}")
    print("\nPyTorch, top kernels (us per step):")
    for name, us in sorted(pt, key=lambda kv: -kv[1])[:40]:
        print(f"  {us:9.1f}  {name[:150]}")


if __name__ == "__main__":
    main()
