#!/usr/bin/env bash
# Checks that every C++/CUDA file under src/, tools/, tests/ and bench/ (or the files named on
# the command line) is formatted as .clang-format says, with Debian 12's clang-format 14
# (apt-get install clang-format); files are not changed. Exit status 1 lists the files that
# differ; `clang-format -i FILE` formats one. CLANG_FORMAT=path picks another binary.
set -euo pipefail
cd "$(dirname "$0")/.."
clang_format=${CLANG_FORMAT:-/usr/bin/clang-format}
if ! command -v "$clang_format" >/dev/null; then
  echo "check-format: $clang_format not found (apt-get install clang-format)" >&2
  exit 2
fi
version=$("$clang_format" --version)
case $version in
  *"version 14."*) ;;
  *) echo "check-format: warning: expected clang-format 14, got: $version" >&2 ;;
esac
if [ $# -gt 0 ]; then
  files=("$@")
else
  mapfile -t files < <(find src tools tests bench -type f \
    \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) | sort)
fi
bad=()
for f in "${files[@]}"; do
  if ! "$clang_format" --style=file --dry-run -Werror "$f" >/dev/null 2>&1; then
    bad+=("$f")
  fi
done
if [ ${#bad[@]} -gt 0 ]; then
  printf '%s\n' "${bad[@]}"
  echo "check-format: ${#bad[@]} of ${#files[@]} files are not formatted (clang-format -i FILE," \
       "or: $clang_format --style=file --dry-run FILE to see where)" >&2
  exit 1
fi
echo "check-format: all ${#files[@]} files formatted"
