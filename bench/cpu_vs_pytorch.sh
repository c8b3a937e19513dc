#!/usr/bin/env bash
# Side-by-side CPU training throughput: hourglass and Debian's PyTorch (python3-torch, run by
# /usr/bin/python3) on the same model, batch and thread count, in one run; prints the ratio.
# fp32 rows always; bf16 rows where the CPU has AVX-512 BF16 or AMX.
# Usage: bench/cpu_vs_pytorch.sh [steps]     (needs build/hourglass and python3-torch)
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-10}
threads=$(nproc)
hg=./build/hourglass
run_pair() {   # label, hourglass args, torch args
  local label=$1 hg_args=$2 torch_args=$3
  local h t
  h=$($hg bench $hg_args --steps "$steps" --warmup 3 --threads "$threads" --json)
  t=$(/usr/bin/python3 bench/torch_cpu.py $torch_args --steps "$steps" --warmup 3 --threads "$threads" --json)
  /usr/bin/python3 - "$label" "$h" "$t" <<'PY'
import json, sys
label, h, t = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
ht, tt = h["train_images_per_s"], t["train_images_per_s"]
he, te = h["eval_images_per_s"], t["eval_images_per_s"]
print(f"| {label} | {ht:.1f} | {tt:.1f} | {ht/tt:.2f}x | {he:.1f} | {te:.1f} | {he/te:.2f}x |")
PY
}
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $threads threads; torch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)')"
echo "| workload | hourglass train img/s | PyTorch train img/s | ratio | hourglass eval img/s | PyTorch eval img/s | ratio |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
run_pair "CIFAR ResNet-18, batch 64, fp32" "resnet18-cifar --batch 64" "--model resnet18-cifar --batch 64"
run_pair "small CNN 28x28x1, batch 128, fp32" "small-cnn --batch 128 --in-channels 1 --size 28" \
  "--model small-cnn --batch 128 --in-channels 1 --size 28"
# bf16 where the CPU has bf16 instructions (hourglass refuses it elsewhere, naming them):
# PyTorch under torch.autocast("cpu", bfloat16) with channels-last, its fastest bf16 form.
if $hg bench resnet18-cifar --precision bf16 --batch 2 --steps 1 --warmup 0 >/dev/null 2>&1; then
  run_pair "CIFAR ResNet-18, batch 64, bf16" "resnet18-cifar --batch 64 --precision bf16" \
    "--model resnet18-cifar --batch 64 --bf16 --channels-last"
  run_pair "small CNN 28x28x1, batch 128, bf16" \
    "small-cnn --batch 128 --in-channels 1 --size 28 --precision bf16" \
    "--model small-cnn --batch 128 --in-channels 1 --size 28 --bf16 --channels-last"
else
  echo "(no bf16 rows: $($hg bench resnet18-cifar --precision bf16 --batch 2 --steps 1 --warmup 0 2>&1 | tail -1))"
fi
