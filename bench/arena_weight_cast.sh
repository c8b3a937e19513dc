#!/usr/bin/env bash
# The parameter arena converted to the compute dtype in one kernel a step, the layers taking
# views of that copy (ops::arena_weight_cast: --engine arena_weight_cast=true), against a cast of each
# weight where its layer uses it (=0), with `hourglass bench` alternated per run
# (bench/ab_bench.sh) on ResNet-50 224 px batch 256 bf16 and CIFAR ResNet-18 batch 512 bf16:
# images/s, ms a step and the ratio per run, a Markdown table.
#   Usage: bench/arena_weight_cast.sh HOURGLASS OUT [REPEATS]
set -uo pipefail
usage="usage: arena_weight_cast.sh HOURGLASS OUT [REPEATS]"
hg=${1:?$usage}; out=${2:?$usage}; repeats=${3:-2}
here=$(dirname "$0")
echo "### The weights cast in one kernel a step"
bash "$here/ab_bench.sh" "$hg" "$out/arena_weight_cast" "$repeats" \
  "arena||--engine arena_weight_cast=true" "per-layer||--engine arena_weight_cast=false" \
  "r50-bf16|resnet50 --batch 256 --size 224 --precision bf16" \
  "r18-bf16|resnet18-cifar --batch 512 --precision bf16"
