#!/usr/bin/env bash
# Runs on the GPU machine (through the device tool, with .deb carried): unpacks the carried
# Debian packages, then runs the stages named on the command line (default: build test doctor)
# and prints a short table last. Logs go to build-device/logs, and come back as three files
# (the device tool returns at most 8): $OUT/summary.md (the machine and the table),
# $OUT/logs.tgz (every log, checkpoints and weights left out) and, after `observe`,
# $OUT/observe-run.tgz. Without OUT they stay in build-device/logs.
#   build   configure (CUDA backend, sm_90) and build everything into build-device/
#   test    the whole CTest suite (the GPU op tests run here; CI skips them)
#   gputest only the GPU tests (test_*gpu* and the op tests with GPU cases; GPU_TESTS="..."
#           names binaries instead), verbose on failure
#   doctor  hourglass info and hourglass doctor
#   golden  the GPU golden checksums alone (test_train_gpu_golden, also part of gputest):
#           a skip prints the lines tests/golden/gpu_checksums.txt lacks for this GPU
#   golden-ulp  the golden test's own check: three runs in separate processes must agree, then
#           SGD's step size made one ulp larger (optimizer_kernels.cu) must fail it, and the
#           restored source pass it again (rebuilds test_train_gpu_golden twice)
#   bench   bench/gpu_vs_pytorch.sh (hourglass vs PyTorch on this GPU)
#   quick   bench/gpu_vs_pytorch.sh --quick
#   fp32    bench/gpu_vs_pytorch.sh --fp32 (only the fp32 rows, TF32 off)
#   mixed   bench/gpu_vs_pytorch.sh --mixed (only the bf16 and fp16 rows)
#   peaks   bench/gpu_vs_pytorch.sh --quick --defaults: hourglass with its defaults (graph auto)
#           beside PyTorch eager in every row, images/s and peak memory (no torch.compile)
#   train   Fashion-MNIST ResNet-18 bf16 (configs/fashion-mnist-resnet18-gpu.toml)
#   quant   hourglass quantize of the train stage's model (run `train` first) with each
#           calibration method on the GPU, and with mse on the CPU: float and INT8 test
#           accuracy (QUANT_METHODS picks methods); then the float and INT8 models as ONNX in
#           ONNX Runtime beside hourglass predict (bench/onnxruntime_agreement.py)
#   inference  bench/gpu_inference.sh: ResNet-50 224 px inference, hourglass's bf16 eval forward,
#           folded f32 graph and INT8 network beside PyTorch eager bf16 (images/s at batch 256,
#           batch-1 latency)
#   runtime ResNet-50 checkpoint stall, and out-of-memory recovery under --memory-limit
#   data    bench/data_e2e.sh: end-to-end CIFAR-format ResNet-18 bf16 training, dataset on the
#           GPU and through the host loader, against hourglass bench's rate
#   folder  bench/folder_e2e.sh: ResNet-50 bf16 at 224 px fed from a folder of JPEGs, against
#           hourglass bench's rate, with the data wait
#   speedrun  configs/fashion-mnist-speedrun.toml over 5 seeds (SPEEDRUN_SEEDS; bench/speedrun.sh), then the same
#           recipe in PyTorch (bench/torch_speedrun.py; SPEEDRUN_TORCH=0 skips it), each run timed
#           from process start
#   cold    bench/cold_start.sh: the speedrun with the vendor libraries evicted from the page
#           cache, their page-cache warm-up off and on alternated (COLD_ROUNDS, default 2)
#   dp      bench/data_parallel_overhead.sh: the one-rank NCCL data-parallel path against a
#           plain run (hourglass bench and train)
#   observe a Fashion-MNIST run (OBSERVE_EPOCHS, default 2; OBSERVE_MONITOR_SECONDS, default 5),
#           profiled, with its report.html, its monitor.csv (NVML readings) and its TensorBoard
#           events read back by the tensorboard package (tests/tools/read_tensorboard.py); the
#           monitor's cost (a
#           synthetic ResNet-18 run with the monitor off and sampling every 0.5 s); bench_loader's
#           folder rows (the loader alone at 1-16 workers); hourglass profile's table, cost and
#           trace on the Fashion-MNIST config
#   profile hourglass profile on Fashion-MNIST ResNet-18 and synthetic ResNet-50 with CUPTI's
#           kernel records (--timing kernels: table, kernel rows, cost), ResNet-18 again with
#           --timing marks (the default for now: the cost without CUPTI)
#   scale   bench/scaling.sh: data-parallel scaling on every GPU of the machine (1, 2, 4, 8),
#           hourglass launch + bench --data-parallel beside PyTorch DDP under torchrun
#           (ResNet-50 bf16 256/GPU, CIFAR ResNet-18 bf16 512/GPU), after test_cli_gpu_launch_nccl
#           (two NCCL ranks under hourglass launch train one process's weights); the
#           nvidia-h200-x2/-x4/-x8 kinds
#   phases  bench/step_phases.sh: the device time a step of forward, backward and optimizer, the
#           kernels outside them and the gaps, hourglass profile beside PyTorch eager and
#           torch.compile under torch.profiler (CIFAR ResNet-18 b512 and ResNet-50 b256, bf16)
#   stem    bench/stem_space_to_depth.sh: ResNet-50's stem over 2x2 pixel blocks, its forward
#           over pairs of output pixels, and the batch norm's two-part gradient sum, each
#           against what it replaces (STEM_REPEATS, 2; STEM_SECTIONS picks some)
#   graph   bench/graph_replay.sh: hourglass bench with whole-step graph replay on and off,
#           alternated (CIFAR ResNet-18 bf16 and fp16, ResNet-50 bf16, Fashion-MNIST ResNet-18)
#   engine  one [engine] key (ENGINE_KEY, default release_gradients) on against off in
#           bench/ab_bench.sh: images/s and peak MiB of CIFAR ResNet-18 b512 bf16/tf32/fp32 and
#           ResNet-50 b256 bf16/fp32 (ENGINE_REPEATS, default 1)
#   fuse    bench/fused_bn.sh: the fused batch norm + add + ReLU against the unfused ops
#           (--engine fused_batch_norm=true and =false alternated; CIFAR ResNet-18 bf16 and fp16, ResNet-50 bf16)
#   tune    the tuning cache: its CPU and GPU tests (test_ops_tuning_cache,
#           test_ops_gpu_tuning_cache), then bench/first_step.sh: CIFAR-format ResNet-18 trained
#           with a cold, a warm and a `hourglass tune`-filled cache (first step after process
#           start, first epoch against the later ones; TUNE_EPOCHS, default 3)
#   recompute bench/recompute.sh: ResNet-50 bf16 batch 256 plain, with train.recompute "auto"
#           under half its peak memory, and with every block recomputed (throughput ratios)
#   recipe  a training config (RECIPE_CONFIG, default configs/fashion-mnist-resnet18-gpu.toml)
#           over seeds (RECIPE_SEEDS, default "1 2 3") in variants (RECIPE_VARIANTS="TAG
#           key=value ...; TAG key=value ..."; default: "recipe" without overrides): final test
#           accuracy and seconds from process start per seed, and each variant's mean
#   plan    bench/plan_vs_run.sh on the Fashion-MNIST ResNet-18 config: plan's epoch estimate
#           against the epochs of the full training run that follows (which also reports the
#           test accuracy)
set -uo pipefail
cd "$(dirname "$0")/.."
dest=${OUT:-}
out=$PWD/build-device/logs
rm -rf "$out"
mkdir -p "$out"
source scripts/device-env.sh
stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(build test doctor)
table=()
row() { table+=("| $1 | $2 | $3 |"); }
# The table so far into summary.md and, under OUT, summary.md and every log (logs.tgz).
save_results() {
  {
    cat "$out/machine.txt"
    echo "| stage | exit | detail |"
    echo "| --- | --- | --- |"
    printf '%s\n' "${table[@]}"
  } > "$out/summary.md"
  [ -n "$dest" ] || return 0
  cp "$out/summary.md" "$dest/"
  tar czf "$dest/logs.tgz" --exclude=checkpoints --exclude='*.safetensors' --exclude='*.lock' \
    --exclude='*.bin' --exclude=tensorboard --exclude=observe-run.tgz -C build-device logs
}
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
  echo "$(nproc) cores; $(g++ --version | head -1); $(cmake --version | head -1); $(nvcc --version | tail -1)"
} > "$out/machine.txt" 2>&1
for stage in "${stages[@]}"; do
  t0=$(date +%s)
  case $stage in
    build)
      cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DHOURGLASS_GPU="${HOURGLASS_GPU:-cuda}" > "$out/configure.log" 2>&1
      ninja -C build-device > "$out/build.log" 2>&1
      rc=$?
      row build $rc "$(grep -c FAILED "$out/build.log") failed targets, $(( $(date +%s) - t0 )) s"
      [ $rc = 0 ] || { grep -B2 -A12 "FAILED" "$out/build.log" | head -80; }
      ;;
    test)
      (cd build-device && ctest --timeout 600 -j 8 --output-on-failure > "$out/ctest.log" 2>&1)
      row ctest $? "$(grep -E 'tests passed|tests failed' "$out/ctest.log" | tail -1), $(( $(date +%s) - t0 )) s"
      grep -E "\(Failed\)|\(Timeout\)|\(SEGFAULT\)|Exception" "$out/ctest.log" | head -30
      ;;
    gputest)
      fails=0; passed=0
      : > "$out/gputest.log"
      # GPU_TESTS="a b" runs only those binaries of build-device/tests.
      list=(build-device/tests/test_*gpu* build-device/tests/test_device_* build-device/tests/test_dist_comm_nccl build-device/tests/test_ops_sqrt
            build-device/tests/test_optim_mixed_precision build-device/tests/test_cli_doctor)
      [ -n "${GPU_TESTS:-}" ] && { list=(); for n in $GPU_TESTS; do list+=("build-device/tests/$n"); done; }
      for t in "${list[@]}"; do
        [ -x "$t" ] || continue
        if timeout 600 "$t" --gtest_brief=1 >> "$out/gputest.log" 2>&1; then
          passed=$((passed + 1)); else fails=$((fails + 1)); echo "FAILED binary: $t" >> "$out/gputest.log"; fi
      done
      # The convolutions again with cuDNN's NCHW path forced (CTest's gpu_conv_linear_nchw_only).
      t=build-device/tests/test_ops_gpu_conv_linear
      if [ -x "$t" ] && { [ -z "${GPU_TESTS:-}" ] || [[ " $GPU_TESTS " == *" test_ops_gpu_conv_linear "* ]]; }; then
        if HOURGLASS_TEST_CUDNN_LAYOUT=nchw timeout 600 "$t" --gtest_brief=1 >> "$out/gputest.log" 2>&1; then
          passed=$((passed + 1)); else fails=$((fails + 1)); echo "FAILED binary: $t (nchw)" >> "$out/gputest.log"; fi
      fi
      row gputest $fails "$passed binaries passed, $fails failed, $(( $(date +%s) - t0 )) s"
      grep -E "FAILED|Failure|Expected|Which is|actual|error:|SEGFAULT|exception" "$out/gputest.log" | head -80
      ;;
    golden)
      build-device/tests/test_train_gpu_golden > "$out/golden.log" 2>&1
      rc=$?
      row golden $rc "$(grep -cE '^\[ +OK' "$out/golden.log") passed, $(grep -c SKIPPED "$out/golden.log") skipped"
      grep -E "\| [0-9a-f]{16}$|Failure|Expected|Which is|actual|changed" "$out/golden.log" | head -20
      ;;
    golden-ulp)
      g=build-device/tests/test_train_gpu_golden
      src=src/hourglass/backend/gpu/optimizer_kernels.cu
      runs=""
      for i in 1 2 3; do
        "$g" > "$out/golden-run$i.log" 2>&1; runs+="$? "
        grep -E "^golden: " "$out/golden-run$i.log" | sed "s/^/run $i: /"
      done
      cp "$src" "$out/optimizer_kernels.cu.orig"
      sed -i 's/return p - c.lr \* (c.nesterov/return p - (c.lr * 1.00000012f) * (c.nesterov/' "$src"
      changed=$(grep -c "1.00000012f" "$src")
      ninja -C build-device tests/test_train_gpu_golden > "$out/golden-break-build.log" 2>&1
      "$g" > "$out/golden-broken.log" 2>&1; broken=$?
      grep -E "^golden: " "$out/golden-broken.log" | sed "s/^/one ulp: /"
      cp "$out/optimizer_kernels.cu.orig" "$src"
      ninja -C build-device tests/test_train_gpu_golden > "$out/golden-restore-build.log" 2>&1
      "$g" > "$out/golden-restored.log" 2>&1; restored=$?
      grep -E "^golden: " "$out/golden-restored.log" | sed "s/^/restored: /"
      # The hashes decide (a GPU without recorded lines skips, exit 0): every run alike, the one-ulp
      # build's hashes all different, the restored build's the same again.
      h() { grep -E "^golden: " "$1" | sed 's/.* | //' | tr '\n' ' '; }
      h1=$(h "$out/golden-run1.log")
      same=1; for i in 2 3; do [ "$(h "$out/golden-run$i.log")" = "$h1" ] || same=0; done
      moved=1; for a in $(h "$out/golden-broken.log"); do [[ " $h1" == *" $a "* ]] && moved=0; done
      [ -n "$(h "$out/golden-broken.log")" ] || moved=0
      back=0; [ -n "$h1" ] && [ "$(h "$out/golden-restored.log")" = "$h1" ] && back=1
      ok=1; [ "$runs" = "0 0 0 " ] && [ "$changed" = 1 ] && [ $same = 1 ] && [ $moved = 1 ] && [ $back = 1 ] && ok=0
      row golden-ulp $ok "runs alike $same; one ulp moved every hash $moved (exit $broken); restored alike $back (exit $restored)"
      ;;
    doctor)
      ./build-device/hourglass info > "$out/info.txt" 2>&1
      ./build-device/hourglass doctor > "$out/doctor.txt" 2>&1
      rc=$?
      cat "$out/info.txt" "$out/doctor.txt" | head -60
      row doctor $rc "$(grep -c PASS "$out/doctor.txt") pass, $(grep -c FAIL "$out/doctor.txt") fail"
      ;;
    bench|quick|fp32|mixed|peaks)
      flag=""; [ "$stage" = quick ] && flag=--quick; [ "$stage" = fp32 ] && flag=--fp32; [ "$stage" = mixed ] && flag=--mixed
      [ "$stage" = peaks ] && flag="--quick --defaults"
      # Printed as it comes, so a call cut off by its time limit still shows the rows done.
      bash bench/gpu_vs_pytorch.sh ./build-device/hourglass "$out/bench" $flag 2>&1 | tee "$out/bench.md"
      row "$stage" "${PIPESTATUS[0]}" "$(( $(date +%s) - t0 )) s"
      ;;
    train)
      data="$PWD/.deb/root/usr/share/datasets/fashion-mnist"
      rm -rf build-device/runs/fmnist-gpu
      ./build-device/hourglass train configs/fashion-mnist-resnet18-gpu.toml \
        --run-dir build-device/runs/fmnist-gpu --set data.path="$data" --no-progress \
        ${TRAIN_SET:+--set "$TRAIN_SET"} > "$out/train.log" 2>&1
      rc=$?
      cp build-device/runs/fmnist-gpu/metrics.jsonl "$out/" 2>/dev/null
      tail -25 "$out/train.log"
      # Trained on the GPU, evaluated on the CPU from the same checkpoint.
      ./build-device/hourglass eval build-device/runs/fmnist-gpu/final.safetensors --device cpu \
        --set data.path="$data" > "$out/eval-cpu.txt" 2>&1
      row eval-on-cpu $? "$(tail -1 "$out/eval-cpu.txt")"
      row train $rc "$(tail -1 build-device/runs/fmnist-gpu/metrics.jsonl 2>/dev/null | cut -c1-200), $(( $(date +%s) - t0 )) s"
      ;;
    scale)
      build-device/tests/test_cli_gpu_launch_nccl > "$out/launch-nccl.log" 2>&1
      row launch-nccl $? "$(grep -E 'rank\(s\) against|PASSED|FAILED|SKIPPED' "$out/launch-nccl.log" | tr '\n' ' ' | cut -c1-200)"
      bash bench/scaling.sh ./build-device/hourglass "$out/scale" ${SCALE_QUICK:+--quick} \
        > "$out/scale.md" 2>&1
      row scale $? "$(( $(date +%s) - t0 )) s"
      cat "$out/scale.md"
      ;;
    fuse)
      bash bench/fused_bn.sh ./build-device/hourglass "$out/fuse" "${FUSE_REPEATS:-2}" \
        > "$out/fuse.md" 2>&1
      row fuse $? "$(( $(date +%s) - t0 )) s"
      cat "$out/fuse.md"
      ;;
    engine)
      key=${ENGINE_KEY:-release_gradients}
      bash bench/ab_bench.sh ./build-device/hourglass "$out/engine" "${ENGINE_REPEATS:-1}" \
        "$key on||--engine $key=true" "$key off||--engine $key=false" \
        "r18-bf16|resnet18-cifar --batch 512 --precision bf16" \
        "r18-tf32|resnet18-cifar --batch 512 --precision tf32" \
        "r18-fp32|resnet18-cifar --batch 512 --precision fp32" \
        "r50-bf16|resnet50 --batch 256 --size 224 --precision bf16" \
        "r50-fp32|resnet50 --batch 256 --size 224 --precision fp32" 2>&1 | tee "$out/engine.md"
      row engine "${PIPESTATUS[0]}" "$key on against off, $(( $(date +%s) - t0 )) s"
      ;;
    phases)
      bash bench/step_phases.sh ./build-device/hourglass "$out/phases" > "$out/phases.md" 2>&1
      row phases $? "$(( $(date +%s) - t0 )) s"
      cat "$out/phases.md"
      ;;
    stem)
      bash bench/stem_space_to_depth.sh ./build-device/hourglass "$out/stem" \
        "${STEM_REPEATS:-2}" > "$out/stem.md" 2>&1
      row stem $? "$(( $(date +%s) - t0 )) s"
      cat "$out/stem.md"
      ;;
    graph)
      bash bench/graph_replay.sh ./build-device/hourglass "$out/graph" "${GRAPH_REPEATS:-2}" \
        > "$out/graph.md" 2>&1
      row graph $? "$(( $(date +%s) - t0 )) s"
      cat "$out/graph.md"
      ;;
    recompute)
      bash bench/recompute.sh ./build-device/hourglass "$out/recompute" > "$out/recompute.md" 2>&1
      row recompute $? "$(grep -m1 '^auto:' "$out/recompute.md"), $(( $(date +%s) - t0 )) s"
      cat "$out/recompute.md"
      ;;
    inference)
      bash bench/gpu_inference.sh ./build-device/hourglass "$out/inference" > "$out/inference.md" 2>&1
      row inference $? "$(grep -m1 'int8 / hourglass' "$out/inference.md")"
      cat "$out/inference.md"
      ;;
    data)
      bash bench/data_e2e.sh ./build-device/hourglass "$out/data" "${DATA_EPOCHS:-4}" build-device \
        > "$out/data.md" 2>&1
      row data $? "$(( $(date +%s) - t0 )) s"
      cat "$out/data.md"
      ;;
    folder)
      bash bench/folder_e2e.sh ./build-device/hourglass "$out/folder" "${FOLDER_IMAGES:-12800}" \
        build-device > "$out/folder.md" 2>&1
      row folder $? "$(( $(date +%s) - t0 )) s"
      cat "$out/folder.md"
      ;;
    quant)
      data="$PWD/.deb/root/usr/share/datasets/fashion-mnist"
      model=build-device/runs/fmnist-gpu/final.safetensors
      rm -f build-device/runs/fmnist-gpu/*.int8.safetensors
      : > "$out/quant.md"
      rc=0
      for m in ${QUANT_METHODS:-minmax percentile entropy mse}; do
        ./build-device/hourglass quantize "$model" --method "$m" --set data.path="\"$data\"" \
          --out "build-device/runs/fmnist-gpu/$m.int8.safetensors" --json >> "$out/quant.md" \
          2>> "$out/quant.log" || rc=1
      done
      ./build-device/hourglass quantize "$model" --method mse --device cpu \
        --set data.path="\"$data\"" --out build-device/runs/fmnist-gpu/cpu.int8.safetensors \
        --json >> "$out/quant.md" 2>> "$out/quant.log" || rc=1
      ./build-device/hourglass eval build-device/runs/fmnist-gpu/cpu.int8.safetensors --device cpu \
        --set data.path="\"$data\"" --json >> "$out/quant.md" 2>> "$out/quant.log" || rc=1
      # The float and INT8 models as ONNX, run by ONNX Runtime (CPU provider) beside hourglass.
      m=build-device/runs/fmnist-gpu
      rm -f $m/final.onnx $m/final.fp16.onnx $m/cpu.int8.onnx
      ./build-device/hourglass export $model --format onnx >> "$out/quant.log" 2>&1 &&
        ./build-device/hourglass export $model --format onnx --precision fp16 \
          --out $m/final.fp16.onnx >> "$out/quant.log" 2>&1 &&
        ./build-device/hourglass export $m/cpu.int8.safetensors --format onnx >> "$out/quant.log" 2>&1 &&
        python3 bench/onnxruntime_agreement.py --hourglass ./build-device/hourglass --data "$data" \
          --pair $model $m/final.onnx --pair $model $m/final.fp16.onnx \
          --pair $m/cpu.int8.safetensors $m/cpu.int8.onnx \
          > "$out/onnxruntime.md" 2>> "$out/quant.log" || rc=1
      # CPU inference speed: hourglass bench --inference beside ONNX Runtime on the same models'
      # graphs (a CIFAR-format ResNet-18 trained briefly on synthetic images: speed does not
      # depend on the weights), all cores.
      ort=build-device/runs/ort
      rm -rf $ort
      mkdir -p $ort
      printf 'name = "ort"\nseed = 1\ndevice = "cpu"\n[model]\nname = "resnet18"\n[data]\ndataset = "synthetic"\nsynthetic = { train_size = 128, test_size = 64, height = 32, width = 32, channels = 3, classes = 10 }\n[train]\nepochs = 1\nbatch_size = 64\n' > $ort/r18.toml
      { ./build-device/hourglass train $ort/r18.toml --run-dir $ort/run --no-progress &&
        ./build-device/hourglass quantize $ort/run/final.safetensors --calib-images 128 --no-eval &&
        ./build-device/hourglass export $ort/run/final.safetensors --format onnx &&
        ./build-device/hourglass export $ort/run/final.int8.safetensors --format onnx; } >> "$out/quant.log" 2>&1 || rc=1
      for b in 64 256; do
        ./build-device/hourglass bench resnet18-cifar --inference --batch $b --json --log-level warn \
          >> "$out/cpu-inference.jsonl" 2>> "$out/quant.log" || rc=1
        python3 bench/onnxruntime_cpu_inference.py --threads "$(nproc)" --batch $b \
          float=$ort/run/final.onnx int8=$ort/run/final.int8.onnx >> "$out/cpu-inference.jsonl" \
          2>> "$out/quant.log" || rc=1
      done
      cat "$out/quant.md" "$out/onnxruntime.md" "$out/cpu-inference.jsonl"; tail -5 "$out/quant.log"
      row quant $rc "$(python3 -c "
import json,sys
for l in open('$out/quant.md'):
    j=json.loads(l)
    if 'int8_accuracy' in j: print(j['method'], round(100*j['float_accuracy'],2), round(100*j['int8_accuracy'],2), end='; ')
")"
      ;;
    recipe)
      data="$PWD/.deb/root/usr/share/datasets/fashion-mnist"
      cfg=${RECIPE_CONFIG:-configs/fashion-mnist-resnet18-gpu.toml}
      IFS=';' read -ra variants <<< "${RECIPE_VARIANTS:-recipe}"
      for variant in "${variants[@]}"; do
        read -ra words <<< "$variant"
        tag=${words[0]}
        sets=(); for s in "${words[@]:1}"; do sets+=(--set "$s"); done
        rc=0
        for seed in ${RECIPE_SEEDS:-1 2 3}; do
          d=build-device/runs/$tag-$seed
          rm -rf "$d"
          s0=$(date +%s.%N)
          ./build-device/hourglass train "$cfg" --run-dir "$d" --set data.path="\"$data\"" \
            --set seed=$seed "${sets[@]}" --no-progress > "$out/$tag-$seed.log" 2>&1 || rc=1
          secs=$(python3 -c "print(f'{$(date +%s.%N) - $s0:.1f}')")
          acc=$(python3 -c "
import json
rows = [json.loads(l) for l in open('$d/metrics.jsonl')]
last = [r for r in rows if 'test_acc' in r][-1]
print(f\"{100 * last['test_acc']:.2f}\", f\"{100 * last['ema_test_acc']:.2f}\" if 'ema_test_acc' in last else '-')" 2>/dev/null)
          echo "| $tag | ${words[*]:1} | $seed | ${acc% *} | ${acc#* } | $secs |" | tee -a "$out/recipe.md"
        done
        row "recipe $tag" $rc "$(awk -F'|' -v t="$tag" '$2 == " "t" " {s+=$5; n++} END {if (n) printf "mean %.2f%% over %d seeds", s/n, n}' "$out/recipe.md")"
        save_results
      done
      ;;
    speedrun)
      data="$PWD/.deb/root/usr/share/datasets/fashion-mnist"
      # SPEEDRUN_SET="key=value ..." adds overrides (a variant of the recipe).
      sets=(); for s in ${SPEEDRUN_SET:-}; do sets+=(--set "$s"); done
      rm -rf build-device/speedrun
      # SPEEDRUN_TUNE=1 fills the tuning cache with `hourglass tune` first (a fresh machine's
      # first run otherwise plans every convolution without it).
      if [ "${SPEEDRUN_TUNE:-0}" = 1 ]; then
        s0=$(date +%s.%N)
        ./build-device/hourglass tune configs/fashion-mnist-speedrun.toml \
          --set data.path="\"$data\"" "${sets[@]}" > "$out/speedrun-tune.txt" 2>&1
        echo "hourglass tune: $(tail -1 "$out/speedrun-tune.txt" | cut -c1-160) ($(python3 -c "print(f'{$(date +%s.%N) - $s0:.2f}')") s)" \
          >> "$out/speedrun-tune.md"
      fi
      bash bench/speedrun.sh ./build-device/hourglass configs/fashion-mnist-speedrun.toml \
        build-device/speedrun "${SPEEDRUN_SEEDS:-5}" --set data.path="\"$data\"" "${sets[@]}" > "$out/speedrun.md" 2>&1
      rc=$?
      mkdir -p "$out/speedrun"
      for d in build-device/speedrun/seed-*/; do
        s=$(basename "$d"); cp "$d/metrics.jsonl" "$out/speedrun/$s-metrics.jsonl" 2>/dev/null
        cp "build-device/speedrun/$s.log" "$out/speedrun/" 2>/dev/null
        cp "$d/train.log" "$out/speedrun/$s-train.log" 2>/dev/null
      done
      # SPEEDRUN_TORCH=0 leaves out the PyTorch runs (about 2 minutes).
      for seed in 1 2 3 4 5; do
        [ "${SPEEDRUN_TORCH:-1}" = 0 ] && break
        s0=$(date +%s.%N)
        python3 bench/torch_speedrun.py --data "$data" --seed "$seed" >> "$out/speedrun.md" 2>&1
        echo "  (pytorch seed $seed: $(python3 -c "print(f'{$(date +%s.%N) - $s0:.2f}')") s from process start)" >> "$out/speedrun.md"
      done
      row speedrun $rc "$(grep -m1 'mean test accuracy' "$out/speedrun.md")"
      cat "$out/speedrun-tune.md" 2>/dev/null
      cat "$out/speedrun.md"
      ;;
    cold)
      # bench/cold_start.sh: the speedrun config's first seed with the vendor libraries evicted
      # from the page cache, the page-cache warm-up off and on alternated (COLD_ROUNDS, 2).
      data="$PWD/.deb/root/usr/share/datasets/fashion-mnist"
      bash bench/cold_start.sh ./build-device/hourglass configs/fashion-mnist-speedrun.toml \
        build-device/cold "${COLD_ROUNDS:-2}" --set data.path="\"$data\"" > "$out/cold.md" 2>&1
      row cold $? "$(grep -c '^| o' "$out/cold.md") runs"
      cat "$out/cold.md"
      ;;
    runtime)
      # ResNet-50 checkpoint stall, then the out-of-memory recovery under a device memory limit.
      rm -rf build-device/runs/r50 build-device/runs/r50-oom
      ./build-device/hourglass train configs/synthetic-resnet50-gpu.toml --run-dir build-device/runs/r50 \
        --no-progress > "$out/r50-stall.log" 2>&1
      rc=$?
      grep -E "checkpoint .*waited" "$out/r50-stall.log" | tail -6
      row r50-stall $rc "$(grep -oE 'waited [0-9.]+ s' "$out/r50-stall.log" | sort -k2 -n | tail -1) (max)"
      ./build-device/hourglass train configs/synthetic-resnet50-gpu.toml --run-dir build-device/runs/r50-oom \
        --no-progress --memory-limit "${OOM_LIMIT:-1536MiB}" --set train.batch_size=512 > "$out/oom.log" 2>&1
      rc=$?
      grep -iE "out of memory|micro-batch|limit|test accuracy" "$out/oom.log" | cut -c1-400 | head -12
      row oom $rc "$(grep -ciE 'out of memory' "$out/oom.log") out-of-memory lines, $(( $(date +%s) - t0 )) s"
      ;;
    dp)
      bash bench/data_parallel_overhead.sh ./build-device/hourglass "$out/dp" "${DP_REPEATS:-2}" \
        > "$out/dp.md" 2>&1
      row dp $? "$(( $(date +%s) - t0 )) s"
      cat "$out/dp.md"
      ;;
    observe)
      data="$PWD/.deb/root/usr/share/datasets/fashion-mnist"
      run=build-device/runs/observe
      rm -rf "$run"
      # In-run profiling on (profile.json and trace.json in the run directory), then the report;
      # the run directory comes back without its checkpoints (observe-run.tgz).
      ./build-device/hourglass train configs/fashion-mnist-resnet18-gpu.toml --run-dir "$run" \
        --set data.path="\"$data\"" --set train.epochs="${OBSERVE_EPOCHS:-2}" \
        --set monitor.every_seconds="${OBSERVE_MONITOR_SECONDS:-5}" --set profile.enabled=true \
        --no-progress > "$out/observe.log" 2>&1
      rc=$?
      ./build-device/hourglass report "$run" > "$out/report.log" 2>&1
      row observe-report $? "$(tail -1 "$out/report.log" | cut -c1-120)"
      tar czf "$out/observe-run.tgz" --exclude=checkpoints --exclude='*.safetensors' -C "$run" .
      cp "$run/monitor.csv" "$run/metrics.jsonl" "$out/" 2>/dev/null
      cp "$run"/steps.* "$run"/metrics.csv "$out/" 2>/dev/null
      head -4 "$run/monitor.csv"; echo "monitor.csv rows: $(($(wc -l < "$run/monitor.csv") - 1))"
      python3 tests/tools/read_tensorboard.py "$run" > "$out/tensorboard.txt" 2>&1
      tb=$?
      head -20 "$out/tensorboard.txt"
      row observe-train $rc "$(tail -1 "$out/observe.log" | cut -c1-120)"
      row tensorboard-read $tb "$(grep -c . "$out/tensorboard.txt") lines"
      # OBSERVE_QUICK=1 stops here (the monitor's cost, the profile and the loader rows take
      # about a minute more).
      [ "${OBSERVE_QUICK:-0}" = 1 ] && continue
      # The monitor's cost: the same short run without it and sampling every 0.5 s.
      cat > "$out/mon.toml" <<'TOML'
name = "monitor-cost"
device = "gpu:0"
precision = "bf16"
[model]
name = "resnet18"
[data]
dataset = "synthetic"
synthetic = { train_size = 51200, test_size = 2560, height = 32, width = 32, channels = 3, classes = 10 }
placement = "device"
[train]
epochs = 4
batch_size = 512
TOML
      for every in 0 0.5 0 0.5; do
        rm -rf "$out/mon-run"
        ./build-device/hourglass train "$out/mon.toml" --run-dir "$out/mon-run" --no-progress \
          --set monitor.every_seconds=$every > "$out/mon-$every.log" 2>&1
        python3 -c "import json,sys; l=[json.loads(x) for x in open(sys.argv[1])][1:]; print('monitor.every_seconds=$every', round(sum(x['images_per_s'] for x in l)/len(l)))" "$out/mon-run/metrics.jsonl"
      done | tee "$out/monitor-cost.txt"
      # The op profiler on the same config: its table, its cost and its trace.
      ./build-device/hourglass profile configs/fashion-mnist-resnet18-gpu.toml \
        --set data.path="\"$data\"" --steps 20 --warmup 10 --trace "$out/trace.json" \
        > "$out/profile.txt" 2>&1
      row profile $? "$(tail -1 "$out/profile.txt")"
      head -14 "$out/profile.txt"; tail -3 "$out/profile.txt"
      python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('trace events:', len(d['traceEvents']))" "$out/trace.json"
      ./build-device/bench/bench_loader --benchmark_filter='Folder' --benchmark_min_time=1 2>&1 \
        | grep BM_ | tee "$out/bench_loader_folder.txt"
      ;;
    profile)
      # hourglass profile on a launch-bound step (Fashion-MNIST ResNet-18) and a GPU-bound one
      # (ResNet-50 224 px bf16): the table's head, the ops' share, the profiler's cost.
      data="$PWD/.deb/root/usr/share/datasets/fashion-mnist"
      ./build-device/hourglass profile configs/fashion-mnist-resnet18-gpu.toml \
        --set data.path="\"$data\"" --steps 20 --warmup 10 --timing kernels \
        > "$out/profile-fmnist.txt" 2>&1
      row profile-fmnist $? "$(tail -1 "$out/profile-fmnist.txt")"
      # The same with the event marks around each op instead of CUPTI's kernel records (what the
      # profiler falls back to without libcupti): the two costs side by side.
      ./build-device/hourglass profile configs/fashion-mnist-resnet18-gpu.toml \
        --set data.path="\"$data\"" --steps 20 --warmup 10 --timing marks \
        > "$out/profile-fmnist-marks.txt" 2>&1
      row profile-fmnist-marks $? "$(tail -1 "$out/profile-fmnist-marks.txt")"
      ./build-device/hourglass profile configs/synthetic-resnet50-gpu.toml --steps 10 --warmup 5 \
        --timing kernels --trace "$out/trace-r50.json" > "$out/profile-r50.txt" 2>&1
      row profile-r50 $? "$(grep 'without the profiler' "$out/profile-r50.txt")"
      for f in "$out/profile-fmnist.txt" "$out/profile-r50.txt"; do head -12 "$f"; tail -3 "$f"; done
      ;;
    plan)
      data="$PWD/.deb/root/usr/share/datasets/fashion-mnist"
      bash bench/plan_vs_run.sh ./build-device/hourglass configs/fashion-mnist-resnet18-gpu.toml \
        build-device/plan --set data.path="$data" > "$out/plan.md" 2>&1
      rc=$?
      cat build-device/plan/*-plan.txt build-device/plan/*-run/metrics.jsonl >> "$out/plan.md" 2>/dev/null
      grep -E "epoch on this machine|images/s" build-device/plan/*-plan.txt
      tail -2 build-device/plan/*-train.txt 2>/dev/null
      row plan $rc "$(grep '^| fashion' "$out/plan.md" | cut -c1-160), $(( $(date +%s) - t0 )) s"
      ;;
    tune)
      : > "$out/tune-tests.log"
      for t in build-device/tests/test_ops_tuning_cache build-device/tests/test_ops_gpu_tuning_cache; do
        timeout 600 "$t" --gtest_brief=1 > "$out/tune-test.log" 2>&1
        rc=$?
        cat "$out/tune-test.log" >> "$out/tune-tests.log"
        row "$(basename "$t")" $rc "$(grep -E 'PASSED|FAILED|SKIPPED' "$out/tune-test.log" | tr '\n' ' ' | cut -c1-160)"
      done
      grep -E "Failure|Expected|Which is|actual|error:" "$out/tune-tests.log" | head -40
      bash bench/first_step.sh ./build-device/hourglass "$out/first-step" "${TUNE_EPOCHS:-3}" \
        build-device > "$out/first-step.md" 2>&1
      row first-step $? "$(grep '^| warm' "$out/first-step.md"), $(( $(date +%s) - t0 )) s"
      cat "$out/first-step.md"
      ;;
    *) row "$stage" 2 "unknown stage" ;;
  esac
  save_results  # after every stage: a call cut off later still brings back the stages done
done
save_results
[ -f "$out/observe-run.tgz" ] && [ -n "$dest" ] && mv "$out/observe-run.tgz" "$dest/"
cat "$out/summary.md"
