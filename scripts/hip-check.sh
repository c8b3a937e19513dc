#!/usr/bin/env bash
# Compiles every file of the HIP build (-DHOURGLASS_GPU=hip) for AMD GPUs against two ROCm
# header trees, so that the one source tree stays valid HIP for ROCm 6 and ROCm 7:
#   rocm6  ROCm 6.2's public headers (HIP, MIOpen, hipBLASLt: ../shared/rocm-6.2/include, see its
#          README) ahead of Debian's HIP 5.2 headers, compiled with Debian's hipcc (clang 15):
#          real objects (-c -O2) for gfx90a (MI200). Debian's clang 15 predates gfx942 (MI300)
#          and its device libraries have no gfx1100 (Radeon RX 7900) bitcode: the rocm7 tree
#          covers both.
#   rocm7  ROCm 7.0's HIP and RCCL headers (../shared/rocm-7.0, with --rocm-path) and 6.2's
#          MIOpen and hipBLASLt after them (their APIs as the wrappers use them are unchanged in
#          MIOpen 3.5 and hipBLASLt 1.1), compiled with Debian's clang++-19 (Debian's hipcc
#          cannot parse HIP headers from 6.4 on) for gfx90a, gfx942 (MI300) and gfx1100 (RDNA,
#          wave32) in one invocation per kernel file: objects with relocatable device code
#          (-fgpu-rdc -c -O2: the host code compiled, each target's device code generated and
#          optimised as LLVM bitcode), since the tree has no device libraries to link a device
#          image against (measured: 54 s for this tree against 43 s syntax only). With RCCL:
#          dist/gpu/comm_nccl.cpp is compiled with HOURGLASS_HAS_NCCL.
# The files are those of the HIP build: the kernel files (.cu) and the host files of the GPU
# tree, the MIOpen, hipBLASLt and ROCm wrappers (*_miopen, *_hipblaslt, *_rocm*) included; only
# the CUDA wrappers (*_cudnn, *_cublaslt, *_nvml, *_cupti) are left out. The CMake build
# compiles only the .cu files as HIP; the GPU host files (.cpp), the other library files and the
# CLI files that include the runtime header are plain C++ there (hip::host), so they are checked
# that way, syntax only: with Debian's clang++ (14) in rocm6, clang++-19 in rocm7 (OpenMP's
# header from libomp-dev either way). rocm6 also compiles the GPU host files as HIP, as hipcc
# would. ROCm's headers are a system include root (-isystem), so warnings in them do not count;
# warnings in project code are errors (-Wall -Wextra -Wno-unused-parameter, as in the C++ build,
# and -Werror). Each file compiles against its layer's include root, as in the CMake build
# (cmake/layers.cmake): a folder holding links to its own and the layers in its reach only, so an
# #include of any other layer fails here too. Objects go to a scratch folder and are discarded.
# Usage: scripts/hip-check.sh [--tree rocm6|rocm7|all] [ARCH...]
#          (default: both trees, each for its targets above)
#        scripts/hip-check.sh --find-headers   (prints the ROCm 6 header folder, or exits 1)
#        scripts/hip-check.sh --find-rocm7     (prints the ROCm 7 tree, or exits 1)
# The ROCm 6 headers are the first folder holding HIP's, MIOpen's and hipBLASLt's of:
# $HOURGLASS_ROCM_INCLUDE, $ROCM_PATH/include, /opt/rocm/include, ../shared/rocm-6.2/include.
# The ROCm 7 tree is $HOURGLASS_ROCM7_PATH or ../shared/rocm-7.0 (include/hip, include/rccl and
# share/hip/version, which clang reads for the ROCm version).
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
find_rocm7() {
  local dir=${HOURGLASS_ROCM7_PATH:-$PWD/../shared/rocm-7.0}
  for f in include/hip/hip_runtime.h include/rccl/rccl.h share/hip/version; do
    [ -f "$dir/$f" ] || return 1
  done
  (cd "$dir" && pwd)
}
case "${1:-}" in
  --find-headers) find_headers; exit ;;
  --find-rocm7) find_rocm7; exit ;;
esac
trees=(rocm6 rocm7)
if [ "${1:-}" = --tree ]; then
  case "${2:-}" in
    rocm6 | rocm7) trees=("$2") ;;
    all) ;;
    *) echo "hip-check: --tree ${2:-}: use rocm6, rocm7 or all" >&2; exit 2 ;;
  esac
  shift 2
fi
archs_given=("$@")

if ! rocm_include=$(find_headers); then
  echo "hip-check: no ROCm 6 headers (hip/hip_runtime.h, miopen/miopen.h, hipblaslt/hipblaslt.h)" \
    "in \$HOURGLASS_ROCM_INCLUDE, \$ROCM_PATH/include, /opt/rocm/include or" \
    "../shared/rocm-6.2/include: set ROCM_PATH to a ROCm 6 install" >&2
  exit 1
fi
for tree in "${trees[@]}"; do
  if [ "$tree" = rocm6 ] && ! command -v hipcc >/dev/null; then
    echo "hip-check: hipcc not found (apt-get install hipcc libamdhip64-dev rocm-device-libs)" >&2
    exit 1
  fi
  if [ "$tree" = rocm7 ]; then
    if ! rocm7=$(find_rocm7); then
      echo "hip-check: no ROCm 7 tree (include/hip, include/rccl/rccl.h, share/hip/version) at" \
        "\$HOURGLASS_ROCM7_PATH or ../shared/rocm-7.0" >&2
      exit 1
    fi
    if ! command -v clang++-19 >/dev/null; then
      echo "hip-check: clang++-19 not found (apt-get install clang-19)" >&2
      exit 1
    fi
  fi
done

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# One include root per layer, $scratch/layers/<layer>/hourglass/<used> -> src/hourglass/<used>,
# for the layer and each layer in its reach (cmake/print_layer_reach.cmake: the graph of
# cmake/layers.cmake, as the CMake build uses it).
reach=$(cmake -P cmake/print_layer_reach.cmake) || { echo "hip-check: cmake/print_layer_reach.cmake failed" >&2; exit 1; }
[ -n "$reach" ] || { echo "hip-check: no layers from cmake/print_layer_reach.cmake" >&2; exit 1; }
while read -r -a line; do
  mkdir -p "$scratch/layers/${line[0]}/hourglass"
  for l in "${line[@]:1}"; do  # the layer itself comes first in its reach too
    ln -s "$PWD/src/hourglass/$l" "$scratch/layers/${line[0]}/hourglass/$l"
  done
done <<< "$reach"
# The same selection as src/CMakeLists.txt makes for HOURGLASS_GPU_BACKEND=hip.
mapfile -t files < <(find src/hourglass -path '*/gpu/*' \( -name '*.cu' -o -name '*.cpp' \) |
  grep -Ev '_(cudnn|cublaslt|nvml|cupti)\.cpp$' | sort)
wrappers=$(printf '%s\n' "${files[@]}" | grep -cE '_(miopen|hipblaslt|rocm[a-z_]*)\.cpp$' || true)
mapfile -t kernel_files < <(printf '%s\n' "${files[@]}" | grep '\.cu$')
mapfile -t host_files < <(printf '%s\n' "${files[@]}" | grep '\.cpp$'
  grep -rl 'HOURGLASS_HAS_GPU' --include='*.cpp' src/hourglass | grep -v '/gpu/' | sort
  grep -l 'HOURGLASS_HAS_GPU' tools/hourglass/*.cpp | sort)
common=(-std=c++20 -D__HIP_PLATFORM_AMD__=1 -DHOURGLASS_HAS_GPU=1 -DHOURGLASS_GPU_HIP=1
  -Wall -Wextra -Wno-unused-parameter -Werror)
export scratch

# compile <tree> <compiler> <what: HIP|C++> <files...> -- <flags...>: compiles each file, two at
# a time (one per core), with its layer's include root (dist's with the communicator library's
# definition where the tree has RCCL); stops at the first file that fails, printing its errors.
compile() {
  local tree=$1 cxx=$2 what=$3
  shift 3
  local list=()
  while [ "$1" != -- ]; do list+=("$1"); shift; done
  shift
  printf '%s\n' "${list[@]}" | HG_TREE=$tree HG_CXX=$cxx HG_WHAT=$what xargs -P "$(nproc)" -I{} \
      bash -c '
    f="$1"; shift
    name=$(echo "$f" | tr / _)
    case "$f" in
      tools/*) roots=(-I"$scratch/layers/rl" -I"$scratch/layers/backend" -I"$(dirname "$f")") ;;
      *) roots=(-I"$scratch/layers/$(echo "$f" | cut -d/ -f3)") ;;
    esac
    extra=()
    case "$HG_TREE:$f" in rocm7:src/hourglass/dist/*) extra=(-DHOURGLASS_HAS_NCCL=1) ;; esac
    if [ "$HG_WHAT" = HIP ]; then out=(-o "$scratch/$HG_TREE.$name.o"); else out=(); fi
    if ! "$HG_CXX" "$@" "${extra[@]}" "${roots[@]}" "$f" "${out[@]}" \
        2> "$scratch/$HG_TREE.$name.log"; then
      echo "hip-check $HG_TREE: FAILED ($HG_WHAT) $f"
      grep -v -e Traceback -e "^  File" -e rocm_agent -e subprocess "$scratch/$HG_TREE.$name.log" |
        head -40
      exit 255
    fi' _ {} "$@"
}

# Host files as C++, flags after the tree's include roots.
host_check() {
  local tree=$1 cxx=$2
  shift 2
  if ! command -v "$cxx" >/dev/null; then
    echo "hip-check: $cxx not found (apt-get install clang libomp-dev, or set HOURGLASS_HOST_CXX)" >&2
    exit 1
  fi
  echo "hip-check $tree: ${#host_files[@]} host files as C++ with $cxx"
  compile "$tree" "$cxx" C++ "${host_files[@]}" -- "${common[@]}" -fsyntax-only -fopenmp \
    -DHOURGLASS_VERSION='"hip-check"' -D__HIP_PLATFORM_HCC__=1 "$@"
  echo "hip-check $tree: all ${#host_files[@]} host files compiled as C++"
}

check_rocm6() {
  local archs=("${archs_given[@]}") arch_flags=() start=$SECONDS
  [ ${#archs[@]} -gt 0 ] || archs=(gfx90a)
  for a in "${archs[@]}"; do arch_flags+=(--offload-arch="$a"); done
  echo "hip-check rocm6: ${#files[@]} files ($wrappers ROCm library wrappers) with hipcc for" \
    "${archs[*]} against $rocm_include"
  # hipcc passes its link flags (-lamdhip64, ...) to every compile: not a warning about the code.
  compile rocm6 hipcc HIP "${files[@]}" -- -x hip -c -O2 "${common[@]}" \
    -Wno-unused-command-line-argument -isystem "$rocm_include" "${arch_flags[@]}"
  echo "hip-check rocm6: all ${#files[@]} files compiled for ${archs[*]}"
  host_check rocm6 "${HOURGLASS_HOST_CXX:-clang++}" -isystem "$rocm_include"
  echo "hip-check rocm6: passed in $((SECONDS - start)) s"
}

check_rocm7() {
  local archs=("${archs_given[@]}") arch_flags=() start=$SECONDS
  [ ${#archs[@]} -gt 0 ] || archs=(gfx90a gfx942 gfx1100)
  for a in "${archs[@]}"; do arch_flags+=(--offload-arch="$a"); done
  local include=(-isystem "$rocm7/include" -isystem "$rocm_include")
  echo "hip-check rocm7: ${#kernel_files[@]} kernel files as HIP with clang++-19 for ${archs[*]}" \
    "against $rocm7 (HIP, RCCL) and $rocm_include (MIOpen, hipBLASLt)"
  compile rocm7 clang++-19 HIP "${kernel_files[@]}" -- -x hip -fgpu-rdc -c -O2 -nogpulib \
    --rocm-path="$rocm7" "${common[@]}" "${include[@]}" "${arch_flags[@]}"
  echo "hip-check rocm7: all ${#kernel_files[@]} kernel files compiled for ${archs[*]}"
  # OpenMP's header: clang-19's own (libomp-19-dev) where installed, else libomp-dev's (LLVM 14,
  # the same API), which the sanitizer build needs and which Debian does not let beside it.
  local omp
  for omp in "$(clang++-19 -print-resource-dir)/include/omp.h" \
      "$(clang++ -print-resource-dir 2>/dev/null)/include/omp.h"; do
    [ -f "$omp" ] && break
  done
  if [ ! -f "$omp" ]; then
    echo "hip-check: no omp.h for clang++-19 (apt-get install libomp-dev)" >&2
    exit 1
  fi
  mkdir -p "$scratch/omp"
  ln -sf "$omp" "$scratch/omp/omp.h"
  host_check rocm7 clang++-19 "${include[@]}" -isystem "$scratch/omp"
  # dnn_miopen.cpp's MIOpen 3.5 path (the TF32 math type, chosen by <miopen/version.h>), which
  # 6.2's headers leave out: compiled once more with a version.h of 3.5 that adds what MIOpen 3.5's
  # miopen.h declares for it (MIOPEN_CONVOLUTION_ATTRIB_MATH_TYPE = 3, miopenMathType_t).
  mkdir -p "$scratch/miopen-3.5/miopen"
  cat > "$scratch/miopen-3.5/miopen/version.h" <<'VERSION'
#define MIOPEN_VERSION_MAJOR 3
#define MIOPEN_VERSION_MINOR 5
#define MIOPEN_VERSION_PATCH 0
#define MIOPEN_CONVOLUTION_ATTRIB_MATH_TYPE static_cast<miopenConvolutionAttrib_t>(3)
typedef enum { miopenMathDefault = 0, miopenMathPedantic = 1 } miopenMathType_t;
VERSION
  compile rocm7 clang++-19 "C++, MIOpen 3.5" src/hourglass/backend/gpu/dnn_miopen.cpp -- \
    "${common[@]}" -fsyntax-only -fopenmp -D__HIP_PLATFORM_HCC__=1 "${include[@]}" \
    -isystem "$scratch/omp" -isystem "$scratch/miopen-3.5" -DHG_EXPECT_MIOPEN_MATH_TYPE=1
  echo "hip-check rocm7: dnn_miopen.cpp compiled with MIOpen 3.5's math type too"
  echo "hip-check rocm7: passed in $((SECONDS - start)) s"
}

for tree in "${trees[@]}"; do "check_$tree"; done
