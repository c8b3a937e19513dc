#!/usr/bin/env bash
# Parameter gradients accumulated in one multi-tensor launch at the end of backward
# (ops::batched_leaf_gradients: --engine batched_leaf_gradients=true) against an add_ (and, under
# autocast, a cast) per parameter as each gradient arrives (=0), with `hourglass bench`
# alternated per run (bench/ab_bench.sh) on ResNet-50 224 px batch 256 bf16 and CIFAR
# ResNet-18 batch 512 bf16: images/s, ms a step and the ratio per run, a Markdown table.
#   Usage: bench/leaf_gradients.sh HOURGLASS OUT [REPEATS]
set -uo pipefail
usage="usage: leaf_gradients.sh HOURGLASS OUT [REPEATS]"
hg=${1:?$usage}; out=${2:?$usage}; repeats=${3:-2}
here=$(dirname "$0")
echo "### Parameter gradients in one launch"
bash "$here/ab_bench.sh" "$hg" "$out/leaf_gradients" "$repeats" \
  "batched||--engine batched_leaf_gradients=true" "per-leaf||--engine batched_leaf_gradients=false" \
  "r50-bf16|resnet50 --batch 256 --size 224 --precision bf16" \
  "r18-bf16|resnet18-cifar --batch 512 --precision bf16"
