#!/usr/bin/env bash
# Compiles every file of the HIP build (-DHOURGLASS_GPU=hip) for AMD GPUs with Debian's hipcc
# (clang 15): each kernel file (.cu, as HIP) and each host file of the GPU tree, the MIOpen,
# hipBLASLt and ROCm wrappers (*_miopen, *_hipblaslt, *_rocm*) included; only the CUDA wrappers
# (*_cudnn, *_cublaslt, *_nvml) are left out. The headers are ROCm 6.2's public ones from
# ../shared/rocm-6.2/include (see its README), put ahead of Debian's HIP 5.2 headers, which lack
# MIOpen and hipBLASLt. They are a system include root (-isystem), so warnings in them do not
# count; warnings in project code are errors (-Wall -Wextra -Wno-unused-parameter, as in the
# C++ build, and -Werror). Targets gfx90a (MI200) and gfx940 (MI300; Debian's clang predates
# gfx942). Objects go to a scratch folder and are discarded: this checks that the one source
# tree stays valid HIP against ROCm 6. Each file compiles against its layer's include root, as
# in the CMake build (cmake/layers.cmake): a folder holding links to its own and the layers in
# its reach only, so an #include of any other layer fails here too.
# Usage: scripts/hip-check.sh [ARCH...]
#        scripts/hip-check.sh --find-headers   (prints the header folder it would use, or exits 1)
# The headers are the first folder holding HIP's, MIOpen's and hipBLASLt's of:
# $HOURGLASS_ROCM_INCLUDE, $ROCM_PATH/include, /opt/rocm/include, ../shared/rocm-6.2/include.
set -euo pipefail
cd "$(dirname "$0")/.."
find_headers() {
  local dir header
  for dir in ${HOURGLASS_ROCM_INCLUDE:+"$HOURGLASS_ROCM_INCLUDE"} ${ROCM_PATH:+"$ROCM_PATH/include"} \
      /opt/rocm/include "$PWD/../shared/rocm-6.2/include"; do
    for header in hip/hip_runtime.h miopen/miopen.h hipblaslt/hipblaslt.h; do
      [ -f "$dir/$header" ] || continue 2
    done
    (cd "$dir" && pwd)
    return 0
  done
  return 1
}
if [ "${1:-}" = --find-headers ]; then
  find_headers
  exit
fi
if ! command -v hipcc >/dev/null; then
  echo "hip-check: hipcc not found (apt-get install hipcc libamdhip64-dev rocm-device-libs)" >&2
  exit 1
fi
if ! rocm_include=$(find_headers); then
  echo "hip-check: no ROCm 6 headers (hip/hip_runtime.h, miopen/miopen.h, hipblaslt/hipblaslt.h)" \
    "in \$HOURGLASS_ROCM_INCLUDE, \$ROCM_PATH/include, /opt/rocm/include or" \
    "../shared/rocm-6.2/include: set ROCM_PATH to a ROCm 6 install" >&2
  exit 1
fi
archs=("$@")
[ ${#archs[@]} -gt 0 ] || archs=(gfx90a gfx940)
# hipcc passes its link flags (-lamdhip64, ...) to every compile: not a warning about the code.
flags=(-std=c++20 -O2 -D__HIP_PLATFORM_AMD__=1 -DHOURGLASS_HAS_GPU=1 -DHOURGLASS_GPU_HIP=1
  -isystem "$rocm_include" -Wall -Wextra -Wno-unused-parameter -Werror
  -Wno-unused-command-line-argument)
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
# The same selection as src/CMakeLists.txt makes for HOURGLASS_GPU_BACKEND=hip.
mapfile -t files < <(find src/hourglass -path '*/gpu/*' \( -name '*.cu' -o -name '*.cpp' \) |
  grep -Ev '_(cudnn|cublaslt|nvml|cupti)\.cpp$' | sort)
wrappers=$(printf '%s\n' "${files[@]}" | grep -cE '_(miopen|hipblaslt|rocm[a-z_]*)\.cpp$' || true)
echo "hip-check: ${#files[@]} files ($wrappers ROCm library wrappers) for ${archs[*]}" \
  "against $rocm_include"
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

# The CMake build compiles only the .cu files as HIP; the GPU host files (.cpp), the other
# library files and the CLI files that include the runtime header are plain C++ there (hip::host: __HIP_PLATFORM_AMD__
# and the headers, no -x hip). Checked again that way, syntax only, with Debian's clang++ (14;
# OpenMP from libomp-dev, as scripts/fuzz.sh uses), with the definitions the build gives them.
host_cxx=${HOURGLASS_HOST_CXX:-clang++}
if ! command -v "$host_cxx" >/dev/null; then
  echo "hip-check: $host_cxx not found (apt-get install clang libomp-dev, or set HOURGLASS_HOST_CXX)" >&2
  exit 1
fi
mapfile -t host_files < <(printf '%s\n' "${files[@]}" | grep '\.cpp$'
  grep -rl 'HOURGLASS_HAS_GPU' --include='*.cpp' src/hourglass | grep -v '/gpu/' | sort
  grep -l 'HOURGLASS_HAS_GPU' tools/hourglass/*.cpp | sort)
host_flags=(-std=c++20 -fsyntax-only -fopenmp -DHOURGLASS_VERSION='"hip-check"' -D__HIP_PLATFORM_AMD__=1 -D__HIP_PLATFORM_HCC__=1
  -DHOURGLASS_HAS_GPU=1 -DHOURGLASS_GPU_HIP=1 -isystem "$rocm_include" -Wall -Wextra
  -Wno-unused-parameter -Werror)
echo "hip-check: ${#host_files[@]} host files as C++ with $host_cxx"
export host_cxx
printf '%s\n' "${host_files[@]}" | xargs -P "$(nproc)" -I{} bash -c '
  f="$1"; shift
  case "$f" in
    tools/*) roots=(-I"$scratch/layers/train" -I"$scratch/layers/backend" -I"$(dirname "$f")") ;;
    *) roots=(-I"$scratch/layers/$(echo "$f" | cut -d/ -f3)") ;;
  esac
  if ! "$host_cxx" "$@" "${roots[@]}" "$f" 2> "$scratch/host.$(echo "$f" | tr / _).log"; then
    echo "hip-check: FAILED (as C++) $f"; head -40 "$scratch/host.$(echo "$f" | tr / _).log"
    exit 255
  fi' _ {} "${host_flags[@]}"
echo "hip-check: all ${#host_files[@]} host files compiled as C++"
