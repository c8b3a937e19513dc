#!/usr/bin/env bash
# Installs everything hourglass needs to build, test and run its quickstart on Debian 12.
# Usage: scripts/install-deps.sh [--bench]   (--bench adds Debian's CPU PyTorch for bench/)
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
packages=(
  cmake ninja-build g++ pkg-config git
  libdnnl-dev ocl-icd-opencl-dev          # oneDNN (its CMake config also wants OpenCL)
  libtomlplusplus-dev libcli11-dev nlohmann-json3-dev libfmt-dev libspdlog-dev zlib1g-dev
  libarchive-dev                            # CIFAR-10 read in place from its .tar.gz
  libjpeg62-turbo-dev libpng-dev          # decoding JPEG and PNG images of folder datasets
  libturbojpeg0-dev                         # the tests' and benchmarks' JPEG encoder (TurboJPEG)
  libgtest-dev libgmock-dev libbenchmark-dev
  clang-format                              # scripts/check-format.sh (clang-format 14)
  python3                                   # the independent safetensors reader in the tests
  hipcc libamdhip64-dev rocm-device-libs    # scripts/hip-check.sh: the GPU tree compiled for AMD
  clang libclang-rt-14-dev libomp-dev       # fuzz.sh (libFuzzer, sanitizer runtimes); hip-check.sh (host files)
  dataset-fashion-mnist                     # /usr/share/datasets/fashion-mnist
  openmpi-bin libopenmpi-dev                # the MPI communicator (CPU ranks) and its mpiexec tests
  chromium                                  # headless: renders `hourglass report`'s page in a test
)
if [ "${1:-}" = "--bench" ]; then packages+=(python3-torch); fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
echo "install-deps: ${#packages[@]} packages present"
