#!/usr/bin/env bash
# On the GPU machine (device tool, .deb carried): builds what the stem and pooling changes need,
# runs their GPU tests (TESTS; stops at a failure), a ResNet-50 224 px trace (TRACE=0 skips it),
# the pixel-pairs A/B (bench/stem_space_to_depth.sh; STEM_SECTIONS="" skips it) and, with
# MIXED=1, bench/gpu_vs_pytorch.sh --mixed; with SCALE=1, bench/scaling.sh on this machine's GPUs.
# Logs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-build-device/stem-logs}; mkdir -p "$out"
source scripts/device-env.sh
tests=${TESTS:-"test_ops_gpu_conv_linear test_ops_gpu_pool_loss test_train_gpu_step_graph"}
cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release -DHOURGLASS_GPU=cuda > "$out/configure.log" 2>&1
ninja -C build-device hourglass $tests > "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
echo "built at $SECONDS s"
for t in $tests; do
  ./build-device/tests/$t > "$out/$t.log" 2>&1
  rc=$?
  echo "$t rc=$rc $(grep -E '^\[  (PASSED|FAILED)' "$out/$t.log" | tr '\n' ' ')"
  [ $rc = 0 ] || { grep -E "FAILED|Failure|error" "$out/$t.log" | head -20; exit 1; }
done
if [ "${TRACE:-1}" = 1 ]; then
  ./build-device/hourglass profile configs/synthetic-resnet50-gpu.toml --set data.synthetic.height=224 \
    --set data.synthetic.width=224 --steps 5 --warmup 5 --timing kernels \
    --trace "$out/r50-trace.json" > "$out/r50-profile.txt" 2>&1
  echo "profile rc=$? at $SECONDS s"
fi
if [ -n "${STEM_SECTIONS-pairs}" ]; then
  STEM_SECTIONS=${STEM_SECTIONS-pairs} bash bench/stem_space_to_depth.sh ./build-device/hourglass \
    build-device/stem "${STEM_REPEATS:-2}" > "$out/stem.md" 2>&1
  tail -20 "$out/stem.md"
fi
if [ "${MIXED:-0}" = 1 ]; then
  bash bench/gpu_vs_pytorch.sh ./build-device/hourglass build-device/bench-out --mixed > "$out/bench.md" 2>&1
  echo "mixed rc=$? at $SECONDS s"
  tail -12 "$out/bench.md"
fi
if [ "${SCALE:-0}" = 1 ]; then
  bash bench/scaling.sh ./build-device/hourglass "$out/scale" > "$out/scale.md" 2>&1
  echo "scale rc=$? at $SECONDS s"
  tail -12 "$out/scale.md"
fi
echo "done at $SECONDS s"
