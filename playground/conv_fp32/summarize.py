#!/usr/bin/env python3
"""Merges conv_passes.cu's and torch_passes.py's CSV files into Markdown tables: per model and
pass, the time of one training step's convolutions (each layer's time times its count) for
each method; then each layer's numbers.   python3 summarize.py passes.csv torch.csv"""
import csv
import sys
from collections import defaultdict

methods = ["legacy-nhwc", "legacy-nchw", "graph-nhwc-first", "graph-nhwc-top10",
           "graph-nhwc-best", "graph-nchw-top10", "torch"]
rows = []
for path in sys.argv[1:]:
    try:
        rows += list(csv.DictReader(open(path)))
    except FileNotFoundError:
        pass
t = defaultdict(float)        # (model, pass, method) -> ms per step
layer = defaultdict(dict)     # (model, layer, pass) -> method -> ms
details = {}
for r in rows:
    try:
        ms = float(r["ms"])
    except (TypeError, ValueError):
        continue
    key = (r["model"], r["layer"], r["pass"])
    layer[key][r["method"]] = ms
    details[key + (r["method"],)] = r.get("detail", "")
    if ms > 0:
        t[(r["model"], r["pass"], r["method"])] += ms * int(r["count"])

print("| model | pass | " + " | ".join(methods) + " |")
print("|" + " --- |" * (len(methods) + 2))
for model in ["r18", "r50"]:
    for p in ["fwd", "bwd_data", "bwd_filter", "all"]:
        cells = []
        for m in methods:
            v = (sum(t[(model, q, m)] for q in ["fwd", "bwd_data", "bwd_filter"]) if p == "all"
                 else t[(model, p, m)])
            cells.append(f"{v:.1f}")
        print(f"| {model} | {p} | " + " | ".join(cells) + " |")
print()
print("| model | layer | pass | " + " | ".join(methods) + " | graph choice |")
print("|" + " --- |" * (len(methods) + 4))
for (model, name, p), d in layer.items():
    cells = [f"{d.get(m, -1):.3f}" for m in methods]
    print(f"| {model} | {name} | {p} | " + " | ".join(cells) + " | "
          f"{details.get((model, name, p, 'graph-nhwc-top10'), '')} |")
