#!/usr/bin/env bash
# Fresh Debian 12 machine -> trained model: installs what the `hourglass` command needs, builds
# that executable alone and trains the small CNN on Fashion-MNIST, printing progress and the
# final test accuracy. Arguments go to `hourglass train` (e.g. --set train.epochs=2).
#
# The GPU backend is built only where a GPU is present (nvidia-smi or /dev/kfd) and its
# toolkit is installed, or when HOURGLASS_GPU=cuda|hip asks for it; the quickstart itself
# trains on the CPU either way. Tests and benchmarks are scripts/test.sh's.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
elapsed() { echo "$(($(date +%s) - start)) s"; }

gpu=${HOURGLASS_GPU:-}
if [ -z "$gpu" ]; then
  if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
    gpu=auto
  elif [ -e /dev/kfd ]; then
    gpu=auto
  else
    gpu=off
  fi
fi
cores=$(nproc)
# Measured on a fresh 2-core Debian 12 system (README, "Two commands"): the packages 23 s, the
# CPU-only configure and build 145 s, with the CUDA backend 268 s, the four epochs and the
# evaluation 53 s. The estimates scale the build by the cores.
if [ "$gpu" = off ]; then
  build_note="about $((290 / cores)) s on $cores cores (CPU only: no GPU found; HOURGLASS_GPU=cuda builds the GPU backend)"
else
  build_note="about $((540 / cores)) s on $cores cores (with the GPU backend: HOURGLASS_GPU=$gpu)"
fi
echo "quickstart: 1/3 installing packages (about 30 s)"
bash scripts/install-deps.sh
echo "quickstart: 2/3 building ./build/hourglass, $build_note [$(elapsed)]"
bash scripts/build.sh -DHOURGLASS_GPU="$gpu" -DHOURGLASS_BUILD_TESTS=OFF -DHOURGLASS_BUILD_BENCH=OFF \
  --target hourglass
echo "quickstart: 3/3 training the small CNN on Fashion-MNIST (4 epochs and the evaluation; about 50 s on 2 cores) [$(elapsed)]"
./build/hourglass train configs/quickstart.toml --run-dir runs/quickstart "$@"
./build/hourglass eval runs/quickstart/final.safetensors
echo "quickstart: done in $(elapsed)"
