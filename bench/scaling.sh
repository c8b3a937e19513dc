#!/usr/bin/env bash
# Data-parallel scaling on the GPUs of this machine, hourglass beside PyTorch DDP in one run:
# ResNet-50 224 px bf16 at 256 rows per GPU and CIFAR ResNet-18 bf16 at 512 rows per GPU, on
# 1, 2, 4 and 8 GPUs (as many as nvidia-smi lists). hourglass: `hourglass launch --nproc N --
# bench MODEL --data-parallel` (NCCL, gradient buckets during backward; the job's rate
# is rank 0's times N, the ranks stepping together); PyTorch: bench/torch_ddp.py under torchrun.
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0, also set by hourglass launch). Prints images/s,
# the scaling efficiency against the same framework on one GPU, and hourglass / DDP at each size;
# a Markdown table last.   Usage: bench/scaling.sh HOURGLASS OUT [--quick]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
hg=${1:?usage: scaling.sh HOURGLASS OUT [--quick]}
out=${2:?usage: scaling.sh HOURGLASS OUT [--quick]}
steps=30; rounds=3; warmup=10
[ "${3:-}" = --quick ] && { steps=10; rounds=2; warmup=5; }
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
[ "$gpus" -ge 1 ] || { echo "scaling.sh: no GPU listed by nvidia-smi" >&2; exit 1; }
sizes=(); for n in 1 2 4 8; do [ "$n" -le "$gpus" ] && sizes+=("$n"); done
workloads=("r50|resnet50|256|224" "r18|resnet18-cifar|512|32")
for w in "${workloads[@]}"; do
  IFS='|' read -r name model batch size <<< "$w"
  for n in "${sizes[@]}"; do
    "$hg" launch --nproc "$n" -- bench "$model" --device gpu:0 --batch "$batch" \
      --size "$size" --precision bf16 --steps $steps --rounds $rounds --warmup $warmup \
      --data-parallel --json > "$out/hg-$name-$n.log" 2>&1
    grep '^\[rank 0\] {' "$out/hg-$name-$n.log" | sed 's/^\[rank 0\] //' | tail -1 \
      > "$out/hg-$name-$n.json"
    torchrun --standalone --nproc_per_node "$n" "$here/torch_ddp.py" --model "$model" \
      --batch "$batch" --size "$size" --precision bf16 --steps $steps --rounds $rounds \
      --warmup $warmup --json > "$out/pt-$name-$n.log" 2>&1
    grep '^{' "$out/pt-$name-$n.log" | tail -1 > "$out/pt-$name-$n.json"
  done
done
python3 - "$out" "${sizes[*]}" <<'PY'
import json, os, sys
out, sizes = sys.argv[1], [int(s) for s in sys.argv[2].split()]
def load(n):
    try:
        return json.load(open(os.path.join(out, n + ".json")))
    except Exception:
        return {}
def hg_rate(name, n):  # rank 0's rate on its rows, times the ranks stepping with it
    r = load(f"hg-{name}-{n}")
    return r.get("train_images_per_s", 0.0) * max(r.get("ranks", 1), 1)
def pt_rate(name, n):
    return load(f"pt-{name}-{n}").get("train_images_per_s", 0.0)
dev = next((load(f"pt-r50-{n}").get("device") for n in sizes if load(f"pt-r50-{n}")), "?")
print(f"GPUs: {max(sizes)} x {dev}")
print("| workload | GPUs | hourglass img/s | efficiency | DDP img/s | efficiency | hourglass / DDP |")
print("| --- | --- | --- | --- | --- | --- | --- |")
titles = {"r50": "ResNet-50 224 bf16, 256/GPU", "r18": "CIFAR ResNet-18 bf16, 512/GPU"}
for name in ["r50", "r18"]:
    h1, p1 = hg_rate(name, 1), pt_rate(name, 1)
    for n in sizes:
        h, p = hg_rate(name, n), pt_rate(name, n)
        he = f"{h / (n * h1):.1%}" if h and h1 else "-"
        pe = f"{p / (n * p1):.1%}" if p and p1 else "-"
        ratio = f"{h / p:.2f}x" if h and p else "-"
        print(f"| {titles[name]} | {n} | {h:,.0f} | {he} | {p:,.0f} | {pe} | {ratio} |")
PY
