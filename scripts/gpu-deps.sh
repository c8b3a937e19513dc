#!/usr/bin/env bash
# Downloads (here, where Debian's archive is reachable) the .deb files of the libraries the
# build needs into .deb/, for a machine without a package registry (the GPU machine). There,
# scripts/device-env.sh unpacks them into .deb/root and points CMake and the loader at it.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .deb
cd .deb
rm -f ./*.deb
apt-get download \
  libdnnl-dev libdnnl2 ocl-icd-opencl-dev ocl-icd-libopencl1 opencl-c-headers opencl-clhpp-headers \
  libtomlplusplus-dev libtomlplusplus3 libcli11-dev nlohmann-json3-dev libfmt-dev libfmt9 \
  libspdlog-dev libspdlog1.10 libgtest-dev libgmock-dev libbenchmark-dev libbenchmark1debian \
  libarchive-dev libarchive13 \
  libjpeg62-turbo-dev libjpeg62-turbo libturbojpeg0-dev libturbojpeg0 libpng-dev libpng16-16 \
  libonnx-dev libonnx1 libonnxifi libprotobuf-dev libprotobuf32 libprotobuf-lite32 \
  dataset-fashion-mnist \
  2>/dev/null
echo "gpu-deps: $(ls ./*.deb | wc -l) packages, $(du -sh . | cut -f1) in .deb/"
