#!/usr/bin/env bash
# Source on a machine without Debian's packages (the GPU machine): unpacks the .deb files that
# scripts/gpu-deps.sh downloaded into .deb/root (not /) and exports the paths CMake and the
# dynamic loader need.   Usage: source scripts/device-env.sh
_hg_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
_hg_prefix="$_hg_root/.deb/root"
if [ ! -d "$_hg_prefix/usr" ]; then
  mkdir -p "$_hg_prefix"
  for f in "$_hg_root"/.deb/*.deb; do dpkg -x "$f" "$_hg_prefix"; done
fi
export CMAKE_PREFIX_PATH="$_hg_prefix/usr:$_hg_prefix/usr/lib/x86_64-linux-gnu/cmake${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
export LD_LIBRARY_PATH="$_hg_prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CPATH="$_hg_prefix/usr/include${CPATH:+:$CPATH}"
unset _hg_root _hg_prefix
