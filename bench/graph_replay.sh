#!/usr/bin/env bash
# Whole-step graph replay against eager steps, on a GPU: `hourglass bench` with --graph auto
# and --graph off, alternated (bench/ab_bench.sh), for CIFAR ResNet-18 batch 512 (bf16, fp16),
# ResNet-50 224 px batch 256 bf16 and the Fashion-MNIST ResNet-18 (28x28, one channel, batch
# 512, bf16); images/s and the replayed/eager ratio per run, a Markdown table last.
#   Usage: bench/graph_replay.sh HOURGLASS OUT [REPEATS]
set -uo pipefail
usage="usage: graph_replay.sh HOURGLASS OUT [REPEATS]"
exec bash "$(dirname "$0")/ab_bench.sh" "${1:?$usage}" "${2:?$usage}" "${3:-2}" \
  "replayed||--graph auto" "eager||--graph off" \
  "r18-bf16|resnet18-cifar --batch 512 --precision bf16" \
  "r18-fp16|resnet18-cifar --batch 512 --precision fp16" \
  "r50-bf16|resnet50 --batch 256 --size 224 --precision bf16" \
  "fmnist-r18|resnet18 --batch 512 --size 28 --in-channels 1 --precision bf16"
