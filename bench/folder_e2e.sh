#!/usr/bin/env bash
# A folder of ImageNet-sized JPEGs (about 500x375, written here) feeding ResNet-50 bf16 at
# 224 px, batch 256, on one GPU: the training rate of the epochs after the first and the share
# of training time the step loop waited for batches (data_wait_seconds), beside
# `hourglass bench resnet50`'s rate on device-resident data. The loader decodes with
# libjpeg-turbo on `data.workers = "auto"` threads (all cores but one). Then the same run with
# progressive resizing (data.start_image_size = 160, data.image_size_ramp = [1, 3]: epochs at
# 160, 160, 192 and 224 px), each epoch's rate beside `hourglass bench` at its size.
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

# Progressive resizing: each epoch's rate against the bench at its image size.
for side in 160 192; do
  "$hg" bench resnet50 --device gpu:0 --size $side --batch 256 --precision bf16 --steps 20 \
    --rounds 3 --warmup 10 > "$out/bench-r50-$side.txt" 2>&1
done
cp "$out/bench-r50.txt" "$out/bench-r50-224.txt"
ramp="$out/run-folder-ramp"
rm -rf "$ramp"
"$hg" train configs/folder-resnet18.toml --run-dir "$ramp" --no-progress \
  --set device='"gpu:0"' --set precision='"bf16"' --set model.name='"resnet50"' \
  --set train.epochs=4 --set train.batch_size=256 --set data.path="\"$root\"" \
  --set data.workers='"auto"' --set data.start_image_size=160 --set 'data.image_size_ramp=[1, 3]' \
  > "$out/train-folder-ramp.log" 2>&1 || { tail -20 "$out/train-folder-ramp.log"; exit 1; }
python3 - "$ramp/metrics.jsonl" "$out" "$images" <<'PY'
import json, re, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
n = int(sys.argv[3])
def bench(side):
    rates = re.findall(r'train ([0-9.]+) images/s', open(f"{sys.argv[2]}/bench-r50-{side}.txt").read())
    return max(float(r) for r in rates)
print("progressive resizing (ResNet-50 bf16 b256 from the JPEG folder; epoch 1 includes start-up):")
print("| epoch | side | images/s | bench at that side | ratio | data wait |")
print("|---|---|---|---|---|---|")
for e, (l, side) in enumerate(zip(lines, [160, 160, 192, 224])):
    b = bench(side)
    print(f"| {e + 1} | {side} | {l['images_per_s']:,.0f} | {b:,.0f} | {l['images_per_s'] / b:.3f} | "
          f"{100 * l.get('data_wait_seconds', 0) / (n / l['images_per_s']):.2f}% |")
PY
grep -E "training images" "$out/train-folder-ramp.log" | sed 's/^.*info //' || true
