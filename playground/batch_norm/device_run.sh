#!/usr/bin/env bash
# One device call (run from the repository root with .deb carried): the batch-norm kernel
# variants (bn_variants.cu, checked bit for bit against the library's kernels and timed at
# ResNet-50 and ResNet-18 shapes; BN_VARIANTS=0 skips them), with REDUCE_VARIANTS=1 the
# reductions' stopping points and tails (reduce_variants.cu, $OUT/reduce.csv), then, with PROFILE_R50=1,
# hourglass built and
# `hourglass profile` of ResNet-50 224 px b256 bf16 (CUPTI kernel times per op).
# Results (bn.csv, profile-r50-224.txt, logs) come back as $OUT/batch_norm.tgz.
set -uo pipefail
t0=$(date +%s)
o=/tmp/batch_norm
rm -rf "$o"
mkdir -p "$o"
source scripts/device-env.sh
echo "nvjpeg: $(ls /usr/local/cuda/lib64 2>/dev/null | grep -ci jpeg) files in /usr/local/cuda/lib64"
el() { echo "$(( $(date +%s) - t0 )) s"; }
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv,noheader
  nproc; nvcc --version | tail -1; } > "$o/machine.txt" 2>&1
if [ "${PROFILE_R50:-0}" = 1 ]; then
  (cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release -DHOURGLASS_GPU=cuda \
     > "$o/configure.log" 2>&1 && ninja -C build-device hourglass > "$o/build.log" 2>&1
   echo $? > "$o/ninja.rc") &
  build=$!
fi
if [ "${BN_VARIANTS:-1}" = 1 ]; then
  nvcc -O3 -std=c++20 -arch=sm_90 --extended-lambda -Isrc playground/batch_norm/bn_variants.cu \
    -o /tmp/bn_variants > "$o/nvcc.log" 2>&1 || cat "$o/nvcc.log"
  timeout 240 /tmp/bn_variants "${BN_REPEATS:-20}" > "$o/bn.csv" 2> "$o/bn.log"
  echo "bn_variants rc $? at $(el)"
  python3 playground/batch_norm/summarize.py "$o/bn.csv"
fi
if [ "${REDUCE_VARIANTS:-0}" = 1 ]; then
  nvcc -O3 -std=c++20 -arch=sm_90 --extended-lambda -Isrc \
    playground/batch_norm/reduce_variants.cu -o /tmp/reduce_variants > "$o/nvcc-reduce.log" 2>&1 ||
    cat "$o/nvcc-reduce.log"
  timeout 240 /tmp/reduce_variants "${BN_REPEATS:-20}" > "$o/reduce.csv" 2> "$o/reduce.log"
  echo "reduce_variants rc $? at $(el)"
  [ -n "${OUT:-}" ] && cp "$o/reduce.csv" "$OUT/reduce.csv"
  tail -1 "$o/reduce.csv"
fi
if [ "${PROFILE_R50:-0}" = 1 ]; then
  wait $build
  echo "build rc $(cat "$o/ninja.rc") at $(el)"
  timeout 300 ./build-device/hourglass profile configs/synthetic-resnet50-gpu.toml \
    --set data.synthetic.height=224 --set data.synthetic.width=224 --steps 10 --warmup 5 \
    --timing kernels > "$o/profile-r50-224.txt" 2> "$o/profile-r50-224.log"
  echo "profile rc $? at $(el)"
  head -30 "$o/profile-r50-224.txt"; tail -4 "$o/profile-r50-224.txt"
fi
[ -n "${OUT:-}" ] && tar czf "$OUT/batch_norm.tgz" -C /tmp batch_norm
