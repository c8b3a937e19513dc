#!/usr/bin/env bash
# The fused batch norm + residual add + ReLU (ops::batch_norm_relu_train / _backward) against
# the three unfused ops, on a GPU: `hourglass bench` with HOURGLASS_FUSED_BN=1 and =0,
# alternated, for CIFAR ResNet-18 batch 512 (bf16, fp16) and ResNet-50 224 px batch 256 bf16
# (graph replay on, the default); images/s, ms a step and the fused/unfused ratio per run, a
# Markdown table last.   Usage: bench/fused_bn.sh HOURGLASS OUT [REPEATS]
set -uo pipefail
hg=${1:?usage: fused_bn.sh HOURGLASS OUT [REPEATS]}
out=${2:?usage: fused_bn.sh HOURGLASS OUT [REPEATS]}
repeats=${3:-2}
mkdir -p "$out"
workloads=(
  "r18-bf16|resnet18-cifar --batch 512 --precision bf16"
  "r18-fp16|resnet18-cifar --batch 512 --precision fp16"
  "r50-bf16|resnet50 --batch 256 --size 224 --precision bf16"
)
for w in "${workloads[@]}"; do
  name=${w%%|*}; args=${w#*|}
  for r in $(seq 1 "$repeats"); do
    for f in 1 0; do
      # shellcheck disable=SC2086
      HOURGLASS_FUSED_BN=$f "$hg" bench $args --device gpu:0 --steps 30 --rounds 3 --warmup 10 \
        --json > "$out/$name-$f-$r.json" 2> "$out/$name-$f-$r.log" || echo '{}' > "$out/$name-$f-$r.json"
    done
  done
done
python3 - "$out" "$repeats" <<'PY'
import json, os, sys
out, repeats = sys.argv[1], int(sys.argv[2])
def load(n):
    try: return json.load(open(os.path.join(out, n + ".json")))
    except Exception: return {}
print("| workload | run | fused img/s (ms/step) | unfused img/s (ms/step) | ratio |")
print("| --- | --- | --- | --- | --- |")
for name in ["r18-bf16", "r18-fp16", "r50-bf16"]:
    for r in range(1, repeats + 1):
        a, e = load(f"{name}-1-{r}"), load(f"{name}-0-{r}")
        ia, ie = a.get("train_images_per_s", 0), e.get("train_images_per_s", 0)
        ratio = f"{ia / ie:.3f}" if ia and ie else "-"
        print(f"| {name} | {r} | {ia:,.0f} ({a.get('train_step_ms', 0):.2f}) | "
              f"{ie:,.0f} ({e.get('train_step_ms', 0):.2f}) | {ratio} |")
PY
