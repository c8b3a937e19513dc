#!/usr/bin/env bash
# Compiles the GPU backend for AMD GPUs with Debian's hipcc (HIP 5.2, clang 15): every kernel
# file (.cu, as HIP) and every host file of the GPU tree except the vendor-library wrappers
# (*_cudnn, *_cublaslt, *_nvml for CUDA; *_miopen, *_hipblaslt, *_rocm need ROCm >= 6 headers
# that Debian 12 does not package). Targets gfx90a (MI200) and gfx940 (MI300; Debian's clang
# predates gfx942). Objects go to a scratch folder and are discarded: this checks that the one
# source tree stays valid HIP. Each file compiles against its layer's include root, as in the
# CMake build (cmake/layers.cmake): a folder holding links to its own and the lower layers
# only, so an upward #include fails here too. Usage: scripts/hip-check.sh [ARCH...]
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v hipcc >/dev/null; then
  echo "hip-check: hipcc not found (apt-get install hipcc libamdhip64-dev rocm-device-libs)" >&2
  exit 1
fi
archs=("$@")
[ ${#archs[@]} -gt 0 ] || archs=(gfx90a gfx940)
flags=(-std=c++20 -O2 -DHOURGLASS_HAS_GPU=1 -DHOURGLASS_GPU_HIP=1 -Wno-unused-result)
for a in "${archs[@]}"; do flags+=(--offload-arch="$a"); done
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# One include root per layer, $scratch/layers/<layer>/hourglass/<lower> -> src/hourglass/<lower>.
read -r -a layers < <(sed -n 's/^set(HOURGLASS_LAYERS \(.*\))$/\1/p' cmake/layers.cmake)
[ ${#layers[@]} -gt 0 ] || { echo "hip-check: no layer list in cmake/layers.cmake" >&2; exit 1; }
below=()
for layer in "${layers[@]}"; do
  below+=("$layer")
  mkdir -p "$scratch/layers/$layer/hourglass"
  for l in "${below[@]}"; do
    ln -s "$PWD/src/hourglass/$l" "$scratch/layers/$layer/hourglass/$l"
  done
done
mapfile -t files < <(find src/hourglass -path '*/gpu/*' \( -name '*.cu' -o -name '*.cpp' \) |
  grep -Ev '_(cudnn|cublaslt|nvml|miopen|hipblaslt|rocm)\.cpp$' | sort)
echo "hip-check: ${#files[@]} files for ${archs[*]}"
export scratch
printf '%s\n' "${files[@]}" | xargs -P "$(nproc)" -I{} bash -c '
  f="$1"; shift
  o="$scratch/$(echo "$f" | tr / _).o"
  layer=$(echo "$f" | cut -d/ -f3)   # src/hourglass/<layer>/...
  if ! hipcc -x hip "$@" -I"$scratch/layers/$layer" -c "$f" -o "$o" 2> "$o.log"; then
    echo "hip-check: FAILED $f"; grep -v -e Traceback -e "^  " -e rocm_agent -e "subprocess" "$o.log" | head -40
    exit 255
  fi' _ {} "${flags[@]}"
echo "hip-check: all ${#files[@]} files compiled for ${archs[*]}"
