#!/usr/bin/env bash
# Side-by-side CPU inference: hourglass bench --inference (its eval forward in fp32, the folded
# f32 graph and the INT8 network) and PyTorch's fp32 and quantised ResNet-18 (Debian's
# python3-torch, bench/torch_int8_cpu.py) on CIFAR ResNet-18, the same batch and thread count,
# in one run. Images/s at the batch and batch-1 latency (p50, p99).
# Usage: bench/cpu_inference_vs_pytorch.sh [batch] [steps]   (needs build/hourglass)
set -euo pipefail
cd "$(dirname "$0")/.."
batch=${1:-64}
steps=${2:-10}
threads=$(nproc)
h=$(./build/hourglass bench resnet18-cifar --inference --batch "$batch" --steps "$steps" \
  --threads "$threads" --json --log-level warn)
t=$(/usr/bin/python3 bench/torch_int8_cpu.py --batch "$batch" --steps "$steps" --threads "$threads" --json)
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $threads threads; torch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)')"
/usr/bin/python3 - "$h" "$t" <<'PY'
import json, sys
h, t = json.loads(sys.argv[1]), json.loads(sys.argv[2])
hi, b = h["inference"], h["batch"]
print(f"| CIFAR ResNet-18, batch {b} | images/s | batch-1 p50 ms | batch-1 p99 ms |")
print("| --- | --- | --- | --- |")
rows = [("hourglass fp32 (eval forward)", hi["eval_fp32"]), ("hourglass fp32 (folded graph)", hi["folded_fp32"]),
        ("hourglass int8", hi["int8"]), ("PyTorch fp32", t["eval_fp32"]),
        (f"PyTorch int8 ({t['backend']})", t["int8"])]
for name, r in rows:
    print(f"| {name} | {r['images_per_s']:.1f} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} |")
print(f"hourglass int8 / hourglass fp32: {hi['int8']['images_per_s'] / hi['eval_fp32']['images_per_s']:.2f}x; "
      f"hourglass int8 / PyTorch int8: {hi['int8']['images_per_s'] / t['int8']['images_per_s']:.2f}x "
      f"(batch-1 p50 {t['int8']['p50_ms'] / hi['int8']['p50_ms']:.2f}x lower)")
PY
