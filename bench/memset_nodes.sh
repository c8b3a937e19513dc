#!/usr/bin/env bash
# A captured step's small memset nodes (cuDNN's zeroed counters) as kernel nodes
# (HOURGLASS_GRAPH_MEMSET_KERNELS=1, the default; device/gpu/graph.cpp) against the memset nodes
# as captured (=0), with `hourglass bench` alternated per run (bench/ab_bench.sh) on ResNet-50
# 224 px batch 256 bf16 and CIFAR ResNet-18 batch 512 bf16: images/s, ms a step, the ratio.
#   Usage: bench/memset_nodes.sh HOURGLASS OUT [REPEATS]
set -uo pipefail
usage="usage: memset_nodes.sh HOURGLASS OUT [REPEATS]"
hg=${1:?$usage}; out=${2:?$usage}; repeats=${3:-2}
here=$(dirname "$0")
echo "### Small memset nodes as kernel nodes"
bash "$here/ab_bench.sh" "$hg" "$out/memset_nodes" "$repeats" \
  "kernels|HOURGLASS_GRAPH_MEMSET_KERNELS=1|" "memsets|HOURGLASS_GRAPH_MEMSET_KERNELS=0|" \
  "r50-bf16|resnet50 --batch 256 --size 224 --precision bf16" \
  "r18-bf16|resnet18-cifar --batch 512 --precision bf16"
