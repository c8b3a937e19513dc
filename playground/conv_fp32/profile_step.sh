#!/usr/bin/env bash
# On the GPU machine, after `scripts/gpu-check.sh build`: each kernel of one fp32 training step
# of CIFAR ResNet-18 batch 512, hourglass (Nsight Compute's gpu__time_duration per kernel,
# clocks left alone) against PyTorch eager channels-last (torch.profiler), then a table by
# kind of kernel (playground/conv_fp32/summarize_profile.py). Output in $OUT.
#   bash playground/conv_fp32/profile_step.sh [PRECISION]      (default fp32)
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-build-device/out}
precision=${1:-fp32}
mkdir -p "$out"
hg=build-device/tools/hourglass/hourglass
timeout 400 ncu --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
  "$hg" bench resnet18-cifar --batch 512 --precision "$precision" --device gpu:0 --steps 3 \
  --rounds 1 --warmup 2 > "$out/hg-ncu.csv" 2> "$out/hg-ncu.log"
echo "ncu exit $?, $(wc -l < "$out/hg-ncu.csv") lines"
python3 bench/torch_gpu.py --model resnet18-cifar --batch 512 --precision "$precision" \
  --channels-last --steps 5 --rounds 1 --warmup 5 --profile 3 > "$out/pt.txt" 2> "$out/pt-kernels.tsv"
echo "torch exit $?"
python3 playground/conv_fp32/summarize_profile.py "$out/hg-ncu.csv" "$out/pt-kernels.tsv" | tee "$out/profile-summary.md"
