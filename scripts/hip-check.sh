#!/usr/bin/env bash
# Compiles the GPU backend for AMD GPUs with Debian's hipcc (HIP 5.2, clang 15): every kernel
# file (.cu, as HIP) and every host file of the GPU tree except the vendor-library wrappers
# (*_cudnn, *_cublaslt, *_nvml for CUDA; *_miopen, *_hipblaslt, *_rocm need ROCm >= 6 headers
# that Debian 12 does not package). Targets gfx90a (MI200) and gfx940 (MI300; Debian's clang
# predates gfx942). Objects go to a scratch folder and are discarded: this checks that the one
# source tree stays valid HIP. Usage: scripts/hip-check.sh [ARCH...]
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v hipcc >/dev/null; then
  echo "hip-check: hipcc not found (apt-get install hipcc libamdhip64-dev rocm-device-libs)" >&2
  exit 1
fi
archs=("$@")
[ ${#archs[@]} -gt 0 ] || archs=(gfx90a gfx940)
flags=(-std=c++20 -O2 -Isrc -DHOURGLASS_HAS_GPU=1 -DHOURGLASS_GPU_HIP=1 -Wno-unused-result)
for a in "${archs[@]}"; do flags+=(--offload-arch="$a"); done
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mapfile -t files < <(find src/hourglass -path '*/gpu/*' \( -name '*.cu' -o -name '*.cpp' \) |
  grep -Ev '_(cudnn|cublaslt|nvml|miopen|hipblaslt|rocm)\.cpp$' | sort)
echo "hip-check: ${#files[@]} files for ${archs[*]}"
export scratch
printf '%s\n' "${files[@]}" | xargs -P "$(nproc)" -I{} bash -c '
  f="$1"; shift
  o="$scratch/$(echo "$f" | tr / _).o"
  if ! hipcc -x hip "$@" -c "$f" -o "$o" 2> "$o.log"; then
    echo "hip-check: FAILED $f"; grep -v -e Traceback -e "^  " -e rocm_agent -e "subprocess" "$o.log" | head -40
    exit 255
  fi' _ {} "${flags[@]}"
echo "hip-check: all ${#files[@]} files compiled for ${archs[*]}"
