#!/usr/bin/env bash
# Fresh Debian 12 machine -> trained model: installs the dependencies, builds hourglass and
# trains the small CNN on Fashion-MNIST, printing progress and the final test accuracy.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh -DHOURGLASS_BUILD_TESTS=OFF -DHOURGLASS_BUILD_BENCH=OFF
./build/hourglass train configs/quickstart.toml --run-dir runs/quickstart "$@"
./build/hourglass eval runs/quickstart/final.safetensors
