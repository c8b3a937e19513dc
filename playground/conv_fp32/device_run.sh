#!/usr/bin/env bash
# One device call (run from the repository root with .deb carried): builds hourglass, then runs
# the stages named: passes (conv_passes.cu, f32), torch (torch_passes.py per layer + profile),
# tests (the GPU conv tests; GPU_TESTS overrides the list), fp32 (bench --fp32), bench (the
# whole bench), others (hourglass alone in tf32, bf16, fp16, quick, against the log's numbers).
# Everything lands in $OUT/w, packed into $OUT/all.tgz at the end; summary.md is printed last.
set -uo pipefail
t0=$(date +%s)
o=${OUT:-/tmp/out}/w
mkdir -p "$o"
source scripts/device-env.sh
here=playground/conv_fp32
el() { echo "$(( $(date +%s) - t0 )) s"; }
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv,noheader
  nproc; nvcc --version | tail -1; } > "$o/machine.txt" 2>&1
cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release -DHOURGLASS_GPU=cuda \
  > "$o/configure.log" 2>&1
lib=$(grep '^HOURGLASS_CUDNN_LIBRARY:' build-device/CMakeCache.txt | cut -d= -f2)
inc=$(grep '^HOURGLASS_CUDNN_INCLUDE_DIR:' build-device/CMakeCache.txt | cut -d= -f2)
echo "cudnn: $lib $inc" >> "$o/machine.txt"
targets="hourglass"
tests=${GPU_TESTS:-test_ops_gpu_conv_linear}
case " $* " in *" tests "*) targets="hourglass $tests" ;; esac
(ninja -C build-device $targets > "$o/build.log" 2>&1; echo $? > "$o/ninja.rc") &
build=$!
summary=()
for stage in "$@"; do
  case $stage in
    passes)
      nvcc -O2 -std=c++17 -arch=sm_90 -I"$inc" $here/conv_passes.cu "$lib" -o build-device/conv_passes \
        > "$o/nvcc.log" 2>&1 || cat "$o/nvcc.log"
      DETAIL="$o/candidates.csv" timeout 210 ./build-device/conv_passes --max-candidates 12 \
        > "$o/passes.csv" 2> "$o/passes.log"
      summary+=("passes rc $? at $(el)") ;;
    torch)
      wait $build
      timeout 100 python3 $here/torch_passes.py > "$o/torch.csv" 2> "$o/torch.log"
      summary+=("torch rc $? at $(el)")
      timeout 60 python3 $here/torch_passes.py --profile-only > "$o/profile.txt" 2>&1
      summary+=("profile rc $? at $(el)") ;;
    tests)
      wait $build
      for t in $tests; do
        timeout 200 ./build-device/tests/$t --gtest_brief=1 > "$o/$t.log" 2>&1
        summary+=("$t rc $? at $(el)")
        grep -E "FAILED|Failure|error" "$o/$t.log" | head -20
      done ;;
    others)
      wait $build
      for r in "resnet18-cifar --batch 512 --precision tf32" "resnet18-cifar --batch 512 --precision bf16" \
               "resnet18-cifar --batch 512 --precision fp16" "resnet50 --batch 256 --size 224 --precision bf16"; do
        echo "$r: $(timeout 60 ./build-device/hourglass bench $r --device gpu:0 --steps 10 --rounds 2 \
          --warmup 5 --json 2>>"$o/others.log" | python3 -c 'import json,sys; r=json.load(sys.stdin); print(round(r["train_images_per_s"]), "img/s", round(r["peak_memory_gib"],2), "GiB")')"
      done | tee "$o/others.txt"
      summary+=("others at $(el)") ;;
    fp32|bench)
      wait $build
      flag=""; [ $stage = fp32 ] && flag=--fp32
      timeout 420 bash bench/gpu_vs_pytorch.sh ./build-device/hourglass "$o/bench" $flag \
        > "$o/bench.md" 2>&1
      summary+=("$stage rc $? at $(el)") ;;
  esac
done
wait $build
echo "build rc $(cat "$o/ninja.rc"); $(grep -c FAILED "$o/build.log") failed"
grep -B2 -A10 FAILED "$o/build.log" | head -40
python3 $here/summarize.py "$o/passes.csv" "$o/torch.csv" > "$o/summary.md" 2>&1
grep -h "^cuDNN" "$o"/bench/hg-*.log > "$o/choices.txt" 2>/dev/null
cat "$o/machine.txt"
(cd "${OUT:-/tmp/out}" && tar czf all.tgz w && cp w/summary.md w/bench.md . 2>/dev/null; rm -rf w)
head -12 "${OUT:-/tmp/out}/summary.md" 2>/dev/null
cat "${OUT:-/tmp/out}/bench.md" 2>/dev/null | tail -12
printf '%s\n' "${summary[@]}"
