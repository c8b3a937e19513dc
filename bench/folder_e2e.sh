#!/usr/bin/env bash
# A folder of ImageNet-sized JPEGs (about 500x375, written here) feeding ResNet-50 bf16 at
# 224 px, batch 256, on one GPU: the training rate of the epochs after the first and the share
# of training time the step loop waited for batches (data_wait_seconds), beside
# `hourglass bench resnet50`'s rate on device-resident data. The loader decodes with
# libjpeg-turbo on `data.workers = "auto"` threads (all cores but one).
#   bench/folder_e2e.sh HOURGLASS OUT_DIR [IMAGES] [DATA_DIR]    (default 12,800 images)
set -euo pipefail
hg=$1
out=$2
images=${3:-12800}
root="${4:-$out}/jpeg-folder"
mkdir -p "$out"
python3 "$(dirname "$0")/make_jpeg_folder.py" "$root" "$images"
echo "folder: $images training JPEGs in $root ($(du -sh "$root/train" | cut -f1))"

"$hg" bench resnet50 --device gpu:0 --size 224 --batch 256 --precision bf16 --steps 20 \
  --rounds 3 --warmup 10 > "$out/bench-r50.txt" 2>&1
bench_rate=$(grep -oE 'train [0-9.]+ images/s' "$out/bench-r50.txt" | grep -oE '[0-9.]+' | sort -n | tail -1)
echo "hourglass bench resnet50 224 bf16 b256 (device-resident synthetic data): $bench_rate images/s"

run="$out/run-folder"
rm -rf "$run"
"$hg" train configs/folder-resnet18.toml --run-dir "$run" --no-progress \
  --set device='"gpu:0"' --set precision='"bf16"' --set model.name='"resnet50"' \
  --set train.epochs=3 --set train.batch_size=256 --set data.path="\"$root\"" \
  --set data.workers='"auto"' > "$out/train-folder.log" 2>&1 || { tail -20 "$out/train-folder.log"; exit 1; }
python3 - "$run/metrics.jsonl" "$bench_rate" "$images" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
n = int(sys.argv[3])
later = lines[1:] or lines
train_s = sum(n / l["images_per_s"] for l in later)
wait_s = sum(l.get("data_wait_seconds", 0) for l in later)
rate = n * len(later) / train_s
print(f"train ResNet-50 on the JPEG folder: {rate:,.0f} images/s over epochs 2-{len(lines)} "
      f"= {rate / float(sys.argv[2]):.3f} of bench; data wait {100 * wait_s / train_s:.2f}% of "
      f"training time; first epoch {lines[0]['epoch_seconds']:.1f} s")
PY
grep -iE "skipped|warn" "$out/train-folder.log" | head -5 || true
