#!/usr/bin/env bash
# GPU inference of ResNet-50 at 224 px: `hourglass bench --inference` (the eval forward in bf16,
# the folded f32 graph and the INT8 network, each at the batch and at batch 1) beside PyTorch
# eager's bf16 eval forward (bench/torch_gpu.py --inference, channels-last, autocast) in the same
# run: images/s, batch-1 latency p50/p99, and the ratios the [quant] issue asks for.
#   bench/gpu_inference.sh HOURGLASS OUT_DIR [BATCH]    (default batch 256)
set -euo pipefail
hg=$1
out=$2
batch=${3:-256}
mkdir -p "$out"
"$hg" bench resnet50 --inference --device gpu:0 --size 224 --batch "$batch" --precision bf16 \
  --json --log-level warn > "$out/hourglass.json"
python3 "$(dirname "$0")/torch_gpu.py" --inference --model resnet50 --size 224 --batch "$batch" \
  --precision bf16 --channels-last --json > "$out/torch.json"
python3 - "$out/hourglass.json" "$out/torch.json" <<'PY'
import json, sys
hg = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
pt = json.loads(open(sys.argv[2]).read().strip().splitlines()[-1])
paths = hg["inference"]
print(f"ResNet-50 224 px inference, batch {hg['batch']}, {pt['device']}, PyTorch {pt['version']}")
print("| path | images/s | batch-1 p50 ms | batch-1 p99 ms |")
print("| --- | --- | --- | --- |")
for name, t in paths.items():
    print(f"| hourglass {name} | {t['images_per_s']:,.0f} | {t['p50_ms']:.3f} | {t['p99_ms']:.3f} |")
print(f"| PyTorch eager bf16 | {pt['images_per_s']:,.0f} | {pt['p50_ms']:.3f} | {pt['p99_ms']:.3f} |")
bf16 = paths["eval_bf16"]
print(f"int8 / hourglass bf16 images/s: {paths['int8']['images_per_s'] / bf16['images_per_s']:.2f}x; "
      f"hourglass bf16 / PyTorch bf16 images/s: {bf16['images_per_s'] / pt['images_per_s']:.2f}x; "
      f"batch-1 p50, hourglass bf16 / PyTorch: {bf16['p50_ms'] / pt['p50_ms']:.2f}")
PY
