#!/usr/bin/env bash
# Installs what hourglass needs on Debian 12.
#   scripts/install-deps.sh           building and running the `hourglass` command (the quickstart)
#   scripts/install-deps.sh --test    that, plus the test toolchain (scripts/test.sh): GoogleTest,
#                                     Google Benchmark, clang (fuzzers, sanitizers), clang-format,
#                                     hipcc and clang-19 (the AMD compile checks), Open MPI,
#                                     chromium, ccache
#   scripts/install-deps.sh --bench   that, plus Debian's CPU PyTorch for bench/
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
packages=(
  cmake ninja-build g++ pkg-config
  libdnnl-dev ocl-icd-opencl-dev          # oneDNN (its CMake config also wants OpenCL)
  libtomlplusplus-dev libcli11-dev nlohmann-json3-dev libfmt-dev libspdlog-dev zlib1g-dev
  libarchive-dev                            # CIFAR-10 read in place from its .tar.gz
  libjpeg62-turbo-dev libpng-dev          # decoding JPEG and PNG images of folder datasets
  dataset-fashion-mnist                     # /usr/share/datasets/fashion-mnist
  libonnx-dev libprotobuf-dev               # hourglass export --format onnx (ONNX's protobuf classes)
)
test_packages=(
  git ccache                                # ccache: scripts/build.sh's compiler launcher
  libturbojpeg0-dev                         # the tests' and benchmarks' JPEG encoder (TurboJPEG)
  libgtest-dev libgmock-dev libbenchmark-dev
  clang-format                              # scripts/check-format.sh (clang-format 14)
  python3                                   # the independent safetensors reader in the tests
  hipcc libamdhip64-dev rocm-device-libs    # scripts/hip-check.sh: the GPU tree compiled for AMD
  clang-19                                  # hip-check.sh against ROCm 7's headers (its own
                                            # libomp-19-dev would remove libomp-dev: not wanted)
  clang-tools-19                            # clang-offload-bundler, which clang-19 runs to
                                            # bundle each HIP object's GPU code
  librocm-smi-dev                           # rocm_smi.h: the ROCm SMI calls checked in the build
  clang libclang-rt-14-dev libomp-dev       # the sanitizer and fuzzer build; hip-check.sh's host files
  openmpi-bin libopenmpi-dev                # the MPI communicator (CPU ranks) and its mpiexec tests
  chromium                                  # headless: renders `hourglass report`'s page in a test
  zsh                                       # `hourglass completion zsh` run by zsh in a test
  python3-torchvision                       # `hourglass export --format torch` loaded by torchvision
  python3-onnx                              # `hourglass export --format onnx` checked by onnx.checker
)
case "${1:-}" in
  "") ;;
  --test) packages+=("${test_packages[@]}") ;;
  --bench) packages+=("${test_packages[@]}") ;;  # python3-torch comes with torchvision
  *) echo "install-deps: unknown option '$1' (use --test or --bench, or nothing)" >&2; exit 2 ;;
esac
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
echo "install-deps: ${#packages[@]} packages present"
