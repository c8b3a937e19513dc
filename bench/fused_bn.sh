#!/usr/bin/env bash
# The fused batch norm + residual add + ReLU (ops::batch_norm_train / batch_norm_backward with
# a ReLU) against the three unfused ops, on a GPU: `hourglass bench` with --engine fused_batch_norm=true and =false,
# alternated (bench/ab_bench.sh), for CIFAR ResNet-18 batch 512 (bf16, fp16) and ResNet-50
# 224 px batch 256 bf16 (graph replay on, the default); images/s, ms a step and the
# fused/unfused ratio per run, a Markdown table last.
#   Usage: bench/fused_bn.sh HOURGLASS OUT [REPEATS]
set -uo pipefail
usage="usage: fused_bn.sh HOURGLASS OUT [REPEATS]"
exec bash "$(dirname "$0")/ab_bench.sh" "${1:?$usage}" "${2:?$usage}" "${3:-2}" \
  "fused||--engine fused_batch_norm=true" "unfused||--engine fused_batch_norm=false" \
  "r18-bf16|resnet18-cifar --batch 512 --precision bf16" \
  "r18-fp16|resnet18-cifar --batch 512 --precision fp16" \
  "r50-bf16|resnet50 --batch 256 --size 224 --precision bf16"
