#!/usr/bin/env bash
# ResNet-50's stem batch norm, ReLU and max pooling as one fused op
# (ops::fused_stem_pool: HOURGLASS_FUSED_STEM_POOL=1: the normalised values computed inside the
# pooling pass and never stored; the backward's sums pass gathers the pooled gradient, no
# pooling backward pass) against batch_norm_relu_train then max_pool2d (=0), with
# `hourglass bench` alternated per run (bench/ab_bench.sh) on ResNet-50 224 px batch 256 bf16:
# images/s, ms a step and the ratio per run, a Markdown table.
#   Usage: bench/stem_pool.sh HOURGLASS OUT [REPEATS]
set -uo pipefail
usage="usage: stem_pool.sh HOURGLASS OUT [REPEATS]"
hg=${1:?$usage}; out=${2:?$usage}; repeats=${3:-2}
here=$(dirname "$0")
echo "### The stem's batch norm, ReLU and max pooling fused"
bash "$here/ab_bench.sh" "$hg" "$out/stem_pool" "$repeats" \
  "fused|HOURGLASS_FUSED_STEM_POOL=1|" "apart|HOURGLASS_FUSED_STEM_POOL=0|" \
  "r50-bf16|resnet50 --batch 256 --size 224 --precision bf16"
