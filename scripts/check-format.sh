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
# clang-format over batches of 40 files, one batch per core at a time; a file that differs is
# named at the start of each of its "code should be clang-formatted" lines.
# (--dry-run without -Werror exits 0 on a difference, so a failure here is clang-format's own.)
report=$(mktemp)
trap 'rm -f "$report"' EXIT
if ! printf '%s\0' "${files[@]}" | xargs -0 -P "$(nproc)" -n 40 \
    "$clang_format" --style=file --dry-run 2>"$report" >/dev/null; then
  cat "$report" >&2
  echo "check-format: $clang_format failed" >&2
  exit 2
fi
mapfile -t bad < <(sed -n \
  's/^\(.*\):[0-9]*:[0-9]*: \(warning\|error\): code should be clang-formatted.*/\1/p' \
  "$report" | sort -u)
if [ ${#bad[@]} -gt 0 ]; then
  printf '%s\n' "${bad[@]}"
  echo "check-format: ${#bad[@]} of ${#files[@]} files are not formatted (clang-format -i FILE," \
       "or: $clang_format --style=file --dry-run FILE to see where)" >&2
  exit 1
fi
echo "check-format: all ${#files[@]} files formatted"
