#!/usr/bin/env bash
# The backward's weight gradients on a side stream beside the main stream's work
# (HOURGLASS_WGRAD_SIDE_STREAM=DEPTH, that many convolutions' weight gradients in flight) against
# all of backward on the main stream (=0), with `hourglass bench` alternated per run
# (bench/ab_bench.sh) on ResNet-50 224 px batch 256 bf16 and CIFAR ResNet-18 batch 512 bf16:
# images/s, ms a step and the ratio per run, one Markdown table per depth.
#   Usage: bench/side_stream.sh HOURGLASS OUT [REPEATS] [DEPTHS]   (DEPTHS: "2", "1 2 4", ...)
set -uo pipefail
usage="usage: side_stream.sh HOURGLASS OUT [REPEATS] [DEPTHS]"
hg=${1:?$usage}; out=${2:?$usage}; repeats=${3:-2}; depths=${4:-2}
here=$(dirname "$0")
for depth in $depths; do
  echo "### Weight gradients on a side stream, depth $depth"
  bash "$here/ab_bench.sh" "$hg" "$out/side_stream_$depth" "$repeats" \
    "side-$depth|HOURGLASS_WGRAD_SIDE_STREAM=$depth|" "main|HOURGLASS_WGRAD_SIDE_STREAM=0|" \
    "r50-bf16|resnet50 --batch 256 --size 224 --precision bf16" \
    "r18-bf16|resnet18-cifar --batch 512 --precision bf16"
done
