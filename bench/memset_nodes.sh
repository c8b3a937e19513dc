#!/usr/bin/env bash
# A captured step's small memset nodes (cuDNN's zeroed workspace counters; device/gpu/graph.cpp),
# with `hourglass bench` alternated per run (bench/ab_bench.sh) on ResNet-50 224 px batch 256
# bf16 and CIFAR ResNet-18 batch 512 bf16: images/s, ms a step, the ratio.
#   moved:    as kernel nodes, those into a call's own workspace moved to the graph's start (the
#             default) against in place (HOURGLASS_GRAPH_MEMSET_HOIST=0);
#   kernels:  with MEMSET_NODES_BASELINE=1 also, kernel nodes in place against the memset nodes
#             as captured (HOURGLASS_GRAPH_MEMSET_KERNELS=0).
#   Usage: bench/memset_nodes.sh HOURGLASS OUT [REPEATS]
set -uo pipefail
usage="usage: memset_nodes.sh HOURGLASS OUT [REPEATS]"
hg=${1:?$usage}; out=${2:?$usage}; repeats=${3:-2}
here=$(dirname "$0")
workloads=("r50-bf16|resnet50 --batch 256 --size 224 --precision bf16"
  "r18-bf16|resnet18-cifar --batch 512 --precision bf16")
echo "### Small memset nodes moved to the graph's start"
bash "$here/ab_bench.sh" "$hg" "$out/memset_moved" "$repeats" \
  "moved|HOURGLASS_GRAPH_MEMSET_HOIST=1|" "in-place|HOURGLASS_GRAPH_MEMSET_HOIST=0|" \
  "${workloads[@]}"
if [ "${MEMSET_NODES_BASELINE:-0}" = 1 ]; then
  echo "### Small memset nodes as kernel nodes in place"
  bash "$here/ab_bench.sh" "$hg" "$out/memset_nodes" "$repeats" \
    "kernels|HOURGLASS_GRAPH_MEMSET_HOIST=0 HOURGLASS_GRAPH_MEMSET_KERNELS=1|" \
    "memsets|HOURGLASS_GRAPH_MEMSET_KERNELS=0|" "${workloads[@]}"
fi
