"""Summarises bn_variants' CSV: per shape, each variant's microseconds and its ratio to the
library's kernel it replaces, and over all shapes of a model the summed microseconds."""
import collections
import csv
import sys

rows = [r for r in csv.reader(open(sys.argv[1])) if r and r[0] not in ("model", "bitwise")]
mismatch = [r for r in rows if r[0] == "MISMATCH"]
rows = [r for r in rows if r[0] != "MISMATCH"]
by_shape = collections.OrderedDict()
for model, r, c, variant, us, mb, gbs in rows:
    by_shape.setdefault((model, int(r), int(c)), {})[variant] = (float(us), float(gbs))
print("| model | rows x channels | copy GB/s | fwd us (GB/s) | fwd res us | stats us | "
      "bwd y us (GB/s) | bwd mask_x us (ratio) | bwd res us (GB/s) |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
totals = collections.defaultdict(lambda: collections.defaultdict(float))
for (model, r, c), v in by_shape.items():
    g = lambda k: v.get(k, (float("nan"), float("nan")))
    print(f"| {model} | {r} x {c} | {g('copy')[1]:.0f} | {g('fwd_lib')[0]:.1f} ({g('fwd_lib')[1]:.0f}) | "
          f"{g('fwd_lib_res')[0]:.1f} | {g('stats_lib')[0]:.1f} | "
          f"{g('bwd_lib_y')[0]:.1f} ({g('bwd_lib_y')[1]:.0f}) | "
          f"{g('bwd_mask_x')[0]:.1f} ({g('bwd_lib_y')[0] / g('bwd_mask_x')[0]:.2f}x) | "
          f"{g('bwd_lib_res')[0]:.1f} ({g('bwd_lib_res')[1]:.0f}) |")
    for k, (us, _) in v.items():
        totals[model][k] += us
for model, t in totals.items():
    print(f"{model} totals (us): " + ", ".join(f"{k} {u:.0f}" for k, u in t.items()))
for r in mismatch:
    print("MISMATCH:", ",".join(r))
