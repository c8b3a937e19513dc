#!/usr/bin/env bash
# Rewrites of the ResNet step against what they replace, on a GPU, with `hourglass bench`
# alternated per run (bench/ab_bench.sh):
#  - the stride-2 stem over RGB run as a stride-1 convolution over 2x2 pixel blocks
#    (conv2d.cpp), --engine conv_space_to_depth=true against =false, on ResNet-50 224 px batch 256
#    bf16 and fp16;
#  - that stem's forward over pairs of output pixels (2x4 pixel blocks, conv2d.cpp),
#    --engine conv_stem_pixel_pairs=true against =false, on ResNet-50 bf16 and fp16;
#  - a residual block output's two-part gradient summed in the batch norm's backward
#    (ops::fused_gradient_sum), --engine fused_gradient_sum=true against =false, on ResNet-50 bf16 and
#    CIFAR ResNet-18 batch 512 bf16;
# images/s, ms a step and the ratio per run, a Markdown table per comparison. STEM_SECTIONS
# picks comparisons (default "blocks pairs sum").
#   Usage: bench/stem_space_to_depth.sh HOURGLASS OUT [REPEATS]
set -uo pipefail
usage="usage: stem_space_to_depth.sh HOURGLASS OUT [REPEATS]"
hg=${1:?$usage}; out=${2:?$usage}; repeats=${3:-2}
here=$(dirname "$0")
r50_bf16="r50-bf16|resnet50 --batch 256 --size 224 --precision bf16"
sections=" ${STEM_SECTIONS:-blocks pairs sum} "
r50_fp16="r50-fp16|resnet50 --batch 256 --size 224 --precision fp16"
if [[ $sections == *" blocks "* ]]; then
  echo "### Stem over 2x2 pixel blocks"
  bash "$here/ab_bench.sh" "$hg" "$out/space_to_depth" "$repeats" \
    "blocks||--engine conv_space_to_depth=true" "plain||--engine conv_space_to_depth=false" \
    "$r50_bf16" "$r50_fp16"
  echo
fi
if [[ $sections == *" pairs "* ]]; then
  echo "### Stem's forward over pairs of output pixels"
  bash "$here/ab_bench.sh" "$hg" "$out/pixel_pairs" "$repeats" \
    "pairs||--engine conv_stem_pixel_pairs=true" "2x2||--engine conv_stem_pixel_pairs=false" \
    "$r50_bf16" "$r50_fp16"
  echo
fi
if [[ $sections == *" sum "* ]]; then
  echo "### Gradient sum in the batch norm's backward"
  bash "$here/ab_bench.sh" "$hg" "$out/gradient_sum" "$repeats" \
    "summed||--engine fused_gradient_sum=true" "add||--engine fused_gradient_sum=false" \
    "$r50_bf16" "r18-bf16|resnet18-cifar --batch 512 --precision bf16"
fi
