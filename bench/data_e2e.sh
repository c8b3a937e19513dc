#!/usr/bin/env bash
# End-to-end CIFAR-format training on one GPU beside `hourglass bench`'s device-resident rate:
# CIFAR ResNet-18 bf16, batch 512, augmentation (crop 4 + flip), evaluation each epoch, from
# CIFAR-10 binary files (random pixels: the rate does not depend on them), once with the
# dataset on the GPU (data.placement = "device") and once through the host loader
# (data.placement = "host", 8 workers). Prints, per placement, the training rate of the epochs
# after the first (images/s, as metrics.jsonl reports it), its ratio to the bench rate, and the
# share of training time the step loop waited for batches (data_wait_seconds). Then PyTorch on
# the same files and settings through torchvision and a DataLoader (torch_data_e2e.py).
#   bench/data_e2e.sh HOURGLASS OUT_DIR [EPOCHS] [DATA_DIR]
#     default 4 epochs; the CIFAR files (180 MB) are written to DATA_DIR (default OUT_DIR)
set -euo pipefail
hg=$1
out=$2
epochs=${3:-4}
mkdir -p "$out"
data="${4:-$out}/cifar-10-batches-bin"
python3 - "$data" <<'PY'
import os, sys
d = sys.argv[1]
os.makedirs(d, exist_ok=True)
def write(name, n):
    path = os.path.join(d, name)
    if os.path.exists(path) and os.path.getsize(path) == n * 3073:
        return
    with open(path, "wb") as f:
        for i in range(n):
            f.write(bytes([i % 10]) + os.urandom(3072))
for k in range(1, 6):
    write(f"data_batch_{k}.bin", 10000)
write("test_batch.bin", 10000)
PY

# The loader alone: host worker counts and the GPU-resident path (bench_loader.cpp).
loader_bench="$(dirname "$hg")/bench/bench_loader"
if [ -x "$loader_bench" ]; then
  "$loader_bench" --benchmark_min_time=1 2>&1 | grep -E "BM_|Benchmark" | sed 's/^/loader: /'
fi

"$hg" bench resnet18-cifar --device gpu:0 --batch 512 --precision bf16 --steps 50 --rounds 3 --warmup 10 \
  > "$out/bench.txt" 2>&1
bench_rate=$(grep -oE 'train [0-9.]+ images/s' "$out/bench.txt" | grep -oE '[0-9.]+' | sort -n | tail -1)
echo "hourglass bench resnet18-cifar bf16 b512 (device-resident synthetic data): $bench_rate images/s"

for placement in device host; do
  run="$out/run-$placement"
  rm -rf "$run"
  "$hg" train configs/cifar10-resnet18.toml --run-dir "$run" --no-progress \
    --set device='"gpu:0"' --set precision='"bf16"' --set train.epochs="$epochs" \
    --set data.path="\"$data\"" --set data.placement="\"$placement\"" --set data.workers=8 \
    > "$out/train-$placement.log" 2>&1 || { tail -20 "$out/train-$placement.log"; exit 1; }
  python3 - "$run/metrics.jsonl" "$placement" "$bench_rate" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
later = lines[1:] or lines
images = 50000 * len(later)
train_s = sum(50000 / l["images_per_s"] for l in later)
wait_s = sum(l.get("data_wait_seconds", 0) for l in later)
rate = images / train_s
bench = float(sys.argv[3])
print(f"train, data.placement = {sys.argv[2]:6s}: {rate:,.0f} images/s over epochs 2-{len(lines)} "
      f"= {rate / bench:.3f} of bench; data wait {100 * wait_s / train_s:.2f}% of training time; "
      f"first epoch {lines[0]['epoch_seconds']:.2f} s, later {sum(l['epoch_seconds'] for l in later) / len(later):.2f} s/epoch")
PY
done

# PyTorch as a user writes it: torchvision's CIFAR10 and transforms, a DataLoader with 0 and 8
# workers (bench/torch_data_e2e.py), on the same files and settings.
here=$(dirname "$0")
for workers in 8 0; do
  python3 "$here/torch_data_e2e.py" --data "${4:-$out}" --workers "$workers" --epochs "$epochs" \
    2> "$out/torch-workers-$workers.log" || tail -5 "$out/torch-workers-$workers.log"
done

