#!/usr/bin/env bash
# Whole-step graph replay against eager steps, on a GPU: `hourglass bench` with --graph auto
# and --graph off, alternated, for CIFAR ResNet-18 batch 512 (bf16, fp16), ResNet-50 224 px
# batch 256 bf16 and the Fashion-MNIST ResNet-18 (28x28, one channel, batch 512, bf16); images/s and the replayed/eager ratio per run, a Markdown table
# last.   Usage: bench/graph_replay.sh HOURGLASS OUT [REPEATS]
set -uo pipefail
hg=${1:?usage: graph_replay.sh HOURGLASS OUT [REPEATS]}
out=${2:?usage: graph_replay.sh HOURGLASS OUT [REPEATS]}
repeats=${3:-2}
mkdir -p "$out"
workloads=(
  "r18-bf16|resnet18-cifar --batch 512 --precision bf16"
  "r18-fp16|resnet18-cifar --batch 512 --precision fp16"
  "r50-bf16|resnet50 --batch 256 --size 224 --precision bf16"
  "fmnist-r18|resnet18 --batch 512 --size 28 --in-channels 1 --precision bf16"
)
rows=()
for w in "${workloads[@]}"; do
  name=${w%%|*}; args=${w#*|}
  for r in $(seq 1 "$repeats"); do
    for g in auto off; do
      # shellcheck disable=SC2086
      "$hg" bench $args --device gpu:0 --steps 30 --rounds 3 --warmup 10 --graph $g --json \
        > "$out/$name-$g-$r.json" 2> "$out/$name-$g-$r.log" || echo '{}' > "$out/$name-$g-$r.json"
    done
  done
done
python3 - "$out" "$repeats" <<'PY'
import json, os, sys
out, repeats = sys.argv[1], int(sys.argv[2])
def load(n):
    try: return json.load(open(os.path.join(out, n + ".json")))
    except Exception: return {}
print("| workload | run | replayed img/s (ms/step) | eager img/s (ms/step) | ratio | replays |")
print("| --- | --- | --- | --- | --- | --- |")
for name in ["r18-bf16", "r18-fp16", "r50-bf16", "fmnist-r18"]:
    for r in range(1, repeats + 1):
        a, e = load(f"{name}-auto-{r}"), load(f"{name}-off-{r}")
        ia, ie = a.get("train_images_per_s", 0), e.get("train_images_per_s", 0)
        ratio = f"{ia / ie:.3f}" if ia and ie else "-"
        print(f"| {name} | {r} | {ia:,.0f} ({a.get('train_step_ms', 0):.2f}) | "
              f"{ie:,.0f} ({e.get('train_step_ms', 0):.2f}) | {ratio} | {a.get('graph_replays', '-')} |")
PY
