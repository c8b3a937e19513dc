#!/usr/bin/env bash
# One device call (run from the repository root with .deb carried): builds and runs
# conv_stats_probe.cu (cuDNN convolution + batch-norm statistics fusion at ResNet-50's shapes,
# against the convolution alone and the library's statistics pass). CSV and log under $OUT.
set -uo pipefail
out=${OUT:-/tmp/conv_stats}; mkdir -p "$out"
source scripts/device-env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/machine.txt"
nvcc -O3 -std=c++20 -arch=sm_90 --extended-lambda -Isrc -Iplayground/batch_norm \
  playground/conv_stats/conv_stats_probe.cu -lcudnn -o /tmp/conv_stats_probe > "$out/nvcc.log" 2>&1 \
  || { tail -30 "$out/nvcc.log"; exit 1; }
echo "built at $SECONDS s"
timeout "${PROBE_TIMEOUT:-420}" /tmp/conv_stats_probe "${PROBE_REPEATS:-20}" "${PROBE_CONFIGS:-6}" \
  > "$out/conv_stats.csv" 2> "$out/conv_stats.log"
echo "probe rc=$? at $SECONDS s"
cat "$out/machine.txt"
tr , "\t" < "$out/conv_stats.csv"
tail -5 "$out/conv_stats.log"
