#!/usr/bin/env bash
# A downsampling residual block's two last batch norms (its own and its shortcut's) as one
# fused op, the shortcut's output never stored (--engine fused_shortcut_batch_norm=true: the
# batch_norm ops with a shortcut), against the shortcut's batch norm apart with its output as the
# residual (=0), with `hourglass bench` alternated per run (bench/ab_bench.sh) on ResNet-50
# 224 px batch 256 bf16 and CIFAR ResNet-18 batch 512 bf16: images/s, ms a step and the ratio
# per run, a Markdown table.
#   Usage: bench/shortcut_batch_norm.sh HOURGLASS OUT [REPEATS]
set -uo pipefail
usage="usage: shortcut_batch_norm.sh HOURGLASS OUT [REPEATS]"
hg=${1:?$usage}; out=${2:?$usage}; repeats=${3:-2}
here=$(dirname "$0")
echo "### A downsampling block's two batch norms as one op"
bash "$here/ab_bench.sh" "$hg" "$out/shortcut_batch_norm" "$repeats" \
  "pair||--engine fused_shortcut_batch_norm=true" "apart||--engine fused_shortcut_batch_norm=false" \
  "r50-bf16|resnet50 --batch 256 --size 224 --precision bf16" \
  "r18-bf16|resnet18-cifar --batch 512 --precision bf16"
