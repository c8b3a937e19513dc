#!/usr/bin/env bash
# A process whose vendor libraries are not in the page cache (the first run after a boot or an
# install): CONFIG trained once per round with the page-cache warm-up of cuDNN and cuBLASLt
# (backend/gpu/library_prefetch.h) off and once with it on, each run preceded by evicting those
# libraries' pages (posix_fadvise DONTNEED, which drops clean unmapped pages of a file and
# changes nothing else), alternated. Prints per run the seconds from process start to exit and
# to the first training step, and first how long reading the largest library takes after an
# eviction and again right after (whether eviction works on this machine at all).
#   bench/cold_start.sh HOURGLASS CONFIG OUT_DIR ROUNDS [--set key=value ...]
set -euo pipefail
hg=$1
config=$2
out=$3
rounds=$4
shift 4
mkdir -p "$out"
libs=$(ldd "$hg" | awk '/libcudnn|libcublasLt/ {print $3}' | xargs -r dirname | sort -u)
files=()
for d in $libs; do
  while IFS= read -r f; do files+=("$f"); done < <(find "$d" -maxdepth 1 -type f \
    \( -name 'libcudnn*.so*' -o -name 'libcublasLt*.so*' \))
done
[ ${#files[@]} -gt 0 ] || { echo "no cuDNN or cuBLASLt files found beside $hg's libraries"; exit 1; }
evict() {
  python3 - "${files[@]}" <<'PY'
import os, sys
for f in sys.argv[1:]:
    fd = os.open(f, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
PY
}
largest=$(ls -S "${files[@]}" | head -1)
total=$(du -cb "${files[@]}" | tail -1 | cut -f1)
echo "${#files[@]} library files, $((total >> 20)) MiB; largest $largest"
evict
t0=$(date +%s.%N); cat "$largest" > /dev/null; t1=$(date +%s.%N); cat "$largest" > /dev/null
t2=$(date +%s.%N)
python3 -c "print(f'reading it after an eviction {$t1 - $t0:.2f} s, again {$t2 - $t1:.2f} s')"
run() {  # run NAME PREFETCH [train flags]
  local name=$1 prefetch=$2
  shift 2
  local dir="$out/$name"
  rm -rf "$dir"
  evict
  local start end
  start=$(date +%s.%N)
  HOURGLASS_PREFETCH_LIBRARIES=$prefetch "$hg" train "$config" --run-dir "$dir" --no-progress \
    "$@" > "$out/$name.log" 2>&1 || { tail -20 "$out/$name.log"; exit 1; }
  end=$(date +%s.%N)
  local first
  first=$(grep -oE "first training step issued [0-9.]+ s" "$out/$name.log" | grep -oE "[0-9.]+" |
    head -1)
  python3 -c "print(f'| $name | $prefetch | {$end - $start:.2f} | $first |')"
}
set_args=("$@")
echo
echo "| run | prefetch | seconds from process start to exit | to the first step |"
echo "| --- | --- | --- | --- |"
for r in $(seq 1 "$rounds"); do
  run "off-$r" 0 "${set_args[@]}"
  run "on-$r" 1 "${set_args[@]}"
done
