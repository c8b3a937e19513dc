#!/usr/bin/env bash
# On the GPU machine: Nsight Compute's view of ResNet-50's (224 px, batch 256, bf16) max
# pooling and batch-norm kernels, one eager step. Logs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-build-device/ncu-logs}; mkdir -p "$out"
source scripts/device-env.sh
cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release -DHOURGLASS_GPU=cuda > "$out/configure.log" 2>&1
ninja -C build-device hourglass > "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
echo "built at $SECONDS s"
ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: ${ncu:-none}"
[ -n "$ncu" ] || exit 0
timeout 300 "$ncu" -k "regex:${KERNELS:-max_pool}" --launch-count "${COUNT:-2}" \
  --section SpeedOfLight --section Occupancy --section WarpStateStats \
  --section MemoryWorkloadAnalysis --section LaunchStats --section SchedulerStats \
  --section ComputeWorkloadAnalysis --section InstructionStats ${NCU_FLAGS:-} \
  ./build-device/hourglass bench resnet50 --size 224 --batch 256 --precision bf16 --steps 1 \
  --rounds 1 --warmup 1 --graph off --device gpu:0 > "$out/ncu.txt" 2>&1
echo "ncu rc=$? at $SECONDS s"
[ "${FULL:-0}" = 1 ] && { grep -vE "^==PROF==|^\[" "$out/ncu.txt" | grep -vE "^\s*$|https://|^\s+-+$" | cut -c1-150; exit 0; }
grep -E "max_pool|batch_norm|Duration|Memory Throughput|DRAM Throughput|L1/TEX Hit|L2 Hit|Achieved Occupancy|Theoretical Occupancy|Registers Per|Warp Cycles Per Issued|Block Limit|ERR|error" "$out/ncu.txt" | head -80
