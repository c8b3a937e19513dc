#!/usr/bin/env bash
# Fails when a GPU source file hard-codes a warp width where the width matters: AMD GPUs run
# 64-lane (CDNA, GCN) or 32-lane (RDNA) wavefronts, NVIDIA GPUs 32-lane warps, so every
# shuffle, ballot and warp reduction takes kWarp (backend/gpu/kernel_util.cuh), the compile
# target's width. Checked in the files under src/hourglass/*/gpu/ (.cu, .cuh, .h, .cpp), comments
# left out, a line at a time:
#   shuffle  a shuffle, ballot or vote intrinsic (__shfl*, __ballot*, __any*, __all*,
#            __activemask, __reduce_*_sync, __match_*) given 16, 32 or 64, or a 0xffffffff lane
#            mask outside CUDA-only code (#ifndef HOURGLASS_GPU_HIP, or its #else)
#   lane     threadIdx's lane or warp taken with 32 or 64 (% 32, / 64, & 31, >> 5, ...)
#   width    a warp-width constant (kWarp, warp_size, WARP_SIZE, kWavefront...) set to 32 or 64,
#            except 32 in CUDA-only code (every NVIDIA GPU)
#   tree     a reduction loop starting at 16 or 32 and halving, or stopping below 32 or 64 and
#            doubling
#   warps    warps per block as threads / 32 or / 64
# Usage: tests/tools/check_warp_width.sh [FILE...]   (default: the GPU tree)
#        tests/tools/check_warp_width.sh --self-test (each rule catches its example)
set -euo pipefail
cd "$(dirname "$0")/../.."

# check FILE LABEL: prints "LABEL:LINE: rule: text" for each hard-coded width; status 1 if any.
check() {
  awk -v label="$2" '
    function report(rule) { printf "%s:%d: %s: %s\n", label, NR, rule, raw; found = 1 }
    # Preprocessor state: for each open #if, whether it is CUDA-only ("cuda"), HIP-only ("hip")
    # or other.
    function cuda_only(   i) { for (i = 1; i <= depth; i++) if (kind[i] == "cuda") return 1; return 0 }
    {
      raw = $0
      line = $0
      if (in_block) { if (sub(/.*\*\//, "", line)) in_block = 0; else next }
      gsub(/\/\*.*\*\//, "", line)
      if (sub(/\/\*.*/, "", line)) in_block = 1
      sub(/\/\/.*/, "", line)
    }
    line ~ /^[ \t]*#[ \t]*ifdef[ \t]+HOURGLASS_GPU_HIP/ ||
    line ~ /^[ \t]*#[ \t]*if[ \t]+defined\(HOURGLASS_GPU_HIP\)[ \t]*$/ { kind[++depth] = "hip"; next }
    line ~ /^[ \t]*#[ \t]*ifndef[ \t]+HOURGLASS_GPU_HIP/ ||
    line ~ /^[ \t]*#[ \t]*if[ \t]+!defined\(HOURGLASS_GPU_HIP\)[ \t]*$/ { kind[++depth] = "cuda"; next }
    line ~ /^[ \t]*#[ \t]*if/ { kind[++depth] = "other"; next }
    line ~ /^[ \t]*#[ \t]*(else|elif)/ {
      if (kind[depth] == "hip") kind[depth] = "cuda"; else if (kind[depth] == "cuda") kind[depth] = "hip"
      next
    }
    line ~ /^[ \t]*#[ \t]*endif/ { if (depth > 0) depth--; next }
    line ~ /__(shfl|ballot|any|all|activemask|reduce_[a-z]+_sync|match_[a-z]+)[a-z0-9_]*[ \t]*\(/ {
      call = line
      sub(/.*__(shfl|ballot|any|all|activemask|reduce_[a-z]+_sync|match_[a-z]+)[a-z0-9_]*[ \t]*\(/, "", call)
      if (call ~ /(^|[^A-Za-z0-9_.])(16|32|64)([^A-Za-z0-9_.]|$)/) report("shuffle")
      else if (call ~ /0[xX][fF][fF][fF][fF][fF][fF][fF][fF]/ && !cuda_only()) report("shuffle")
    }
    line ~ /threadIdx\.[xyz][ \t)]*(%|\/|&|>>)[ \t]*(32|64|31|63|5|6)([^0-9]|$)/ { report("lane") }
    line ~ /(^|[^A-Za-z0-9_])(k?[Ww]arp([Ss]ize|_[Ss]ize|[Ww]idth|_[Ww]idth|[Ll]anes)?|WARP_SIZE|WARP_WIDTH|kWavefront[A-Za-z]*|wave(front)?_?[Ss]ize)[ \t]*(=|\{)[ \t]*(32|64)([^0-9]|$)/ {
      if (!(cuda_only() && line ~ /(=|\{)[ \t]*32([^0-9]|$)/)) report("width")
    }
    line ~ /for[ \t]*\([^;]*=[ \t]*(16|32)[ \t]*;[^;]*;[^)]*(>>=[ \t]*1|\/=[ \t]*2)/ { report("tree") }
    line ~ /for[ \t]*\([^;]*;[^;]*<=?[ \t]*(32|64)[ \t]*;[^)]*(<<=[ \t]*1|\*=[ \t]*2)/ { report("tree") }
    line ~ /(blockDim\.[xyz]|[Tt]hreads[A-Za-z_]*)[ \t)]*\/[ \t]*(32|64)([^0-9]|$)/ { report("warps") }
    END { exit found }
  ' "$1"
}

if [ "${1:-}" = --self-test ]; then
  # Each example must be caught, and the allowed forms must not be.
  sample=$(mktemp)
  trap 'rm -f "$sample"' EXIT
  bad=(
    'v += __shfl_xor(v, m, 64);'
    'v = __shfl_down_sync(0xffffffffu, v, 1);'
    'unsigned long long b = __ballot(x > 0); const int n = __popcll(b) / 64;'
    'const int lane = threadIdx.x % 64;'
    'const int warp = threadIdx.x >> 5;'
    'inline constexpr int kWarp = 64;'
    'constexpr int warp_size = 32;'
    'for (int m = 32; m > 0; m >>= 1) v += shfl_xor(v, m);'
    'for (int o = 1; o < 64; o <<= 1) v += shfl_up(v, o);'
    'const int warps = blockDim.x / 64;'
  )
  for example in "${bad[@]}"; do
    printf '%s\n' "$example" > "$sample"
    if check "$sample" example >/dev/null; then
      echo "check_warp_width: self-test: not caught: $example" >&2
      exit 1
    fi
  done
  good='#ifdef HOURGLASS_GPU_HIP
inline constexpr int kWarp = __AMDGCN_WAVEFRONT_SIZE;
#else
inline constexpr int kWarp = 32;  // every NVIDIA GPU
v = __shfl_xor_sync(0xffffffffu, v, m);
#endif
for (int m = kWarp / 2; m > 0; m >>= 1) v += shfl_xor(v, m);  // not 32 here: kWarp
constexpr int kFinishLanes = 64;'
  printf '%s\n' "$good" > "$sample"
  if ! check "$sample" allowed; then
    echo "check_warp_width: self-test: an allowed form was flagged" >&2
    exit 1
  fi
  echo "check_warp_width: self-test: ${#bad[@]} examples caught, the allowed forms passed"
  exit 0
fi

if [ $# -gt 0 ]; then
  files=("$@")
else
  mapfile -t files < <(find src/hourglass -path '*/gpu/*' \
    \( -name '*.cu' -o -name '*.cuh' -o -name '*.h' -o -name '*.cpp' \) | sort)
fi
[ ${#files[@]} -gt 0 ] || { echo "check_warp_width: no GPU source files found" >&2; exit 1; }
failed=0
for f in "${files[@]}"; do
  check "$f" "$f" || failed=1
done
if [ $failed -ne 0 ]; then
  echo "check_warp_width: hard-coded warp widths above: use kWarp (backend/gpu/kernel_util.cuh)" \
    "in kernels, current_warp_width() on the host" >&2
  exit 1
fi
echo "check_warp_width: ${#files[@]} GPU source files, no hard-coded warp width"
