#!/usr/bin/env bash
# Where a JPEG-folder ResNet-50 run loses its rate on the GPU machine (bench/README.md, "a folder
# of JPEGs feeding ResNet-50"): the loader alone at 1-16 workers (bench_loader), then the
# end-to-end folder run (bench/folder_e2e.sh's data and config, 3 epochs, deterministic
# algorithms so no variant pays the timed search) under variants of the host threading:
#   default        as a user runs it (OpenMP compute pool of all cores beside the workers)
#   omp-passive    OMP_WAIT_POLICY=passive (OpenMP threads sleep at once instead of spinning)
#   threads-1      threads = 1 (no OpenMP pool beside the loader)
#   workers-8      data.workers = 8
#   pack           the same images through `hourglass pack` shards
# Prints images/s of epochs 2-3 and the data-wait share for each (VARIANTS="default ..." picks).
#   playground/folder_loader/device_run.sh OUT
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:-${OUT:-build-device/out}}
mkdir -p "$out"
source scripts/device-env.sh
cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release -DHOURGLASS_GPU=cuda > "$out/configure.log" 2>&1
ninja -C build-device hourglass bench_loader > "$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
nproc; lscpu | grep -E "Model name|Thread|Core|Socket|MHz" | head -6
./build-device/bench/bench_loader --benchmark_filter='Folder|Jpeg|CropResize' --benchmark_min_time=1 2>&1 \
  | grep -E "BM_" | tee "$out/bench_loader.txt"
images=12800
root=build-device/folder-data/jpeg-folder
python3 bench/make_jpeg_folder.py "$root" "$images"
variant() {
  name=$1; shift
  run="$out/run-$name"
  rm -rf "$run"
  env "$@" ./build-device/hourglass train configs/folder-resnet18.toml --run-dir "$run" --no-progress \
    --set device='"gpu:0"' --set precision='"bf16"' --set model.name='"resnet50"' \
    --set deterministic=true --set train.epochs=3 --set train.batch_size=256 \
    --set data.path="\"$root\"" --set data.workers='"auto"' ${EXTRA:-} > "$out/$name.log" 2>&1
  python3 - "$run/metrics.jsonl" "$images" "$name" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
n = int(sys.argv[2]); later = lines[1:]
train_s = sum(n / l["images_per_s"] for l in later)
wait_s = sum(l.get("data_wait_seconds", 0) for l in later)
print(f"| {sys.argv[3]} | {n * len(later) / train_s:,.0f} | {100 * wait_s / train_s:.1f}% | {lines[0]['epoch_seconds']:.1f} |")
PY
}
echo "| variant | images/s (epochs 2-3) | data wait | first epoch s |"
echo "| --- | --- | --- | --- |"
for v in ${VARIANTS:-default omp-passive threads-1 workers-8}; do
  case $v in
    default) variant default X=1 ;;
    omp-passive) variant omp-passive OMP_WAIT_POLICY=passive ;;
    threads-1) EXTRA="--set threads=1" variant threads-1 X=1 ;;
    workers-8) EXTRA="--set data.workers=8" variant workers-8 X=1 ;;
    pack)  # the same images through hourglass pack's shards: one pread per image, no open()
      packs=build-device/folder-data/jpeg-pack
      [ -f "$packs/val/index.hgpack" ] || { rm -rf "$packs"
        ./build-device/hourglass pack "$root/train" "$packs/train" > "$out/pack.log" 2>&1
        ./build-device/hourglass pack "$root/val" "$packs/val" >> "$out/pack.log" 2>&1; }
      ls "$packs/train" | head -3
      EXTRA="--set data.path=\"$packs\"" variant pack X=1 ;;
  esac
done
