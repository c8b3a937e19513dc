#!/usr/bin/env bash
# CTest package_install (tests/CMakeLists.txt): installs a build into a fresh prefix and checks
# what a user gets; builds tests/package/consumer against the installed CMake package and runs
# it; makes the Debian packages with CPack, reads their contents and dependencies, unpacks the
# command's package into a fresh root and trains the quickstart config with it.
# Usage: check_install.sh SOURCE_DIR BUILD_DIR WORK_DIR
set -euo pipefail
src=$1 build=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
fail() { echo "check_install: $*" >&2; exit 1; }

prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" > "$work/install.log"
version=$("$prefix/bin/hourglass" --version)
[[ $version == "hourglass "* ]] || fail "installed hourglass --version printed '$version'"
for f in share/hourglass/configs/quickstart.toml share/doc/hourglass/LICENSE \
         share/doc/hourglass/README.md share/bash-completion/completions/hourglass \
         share/zsh/vendor-completions/_hourglass \
         include/hourglass/ops/ops.h lib/cmake/hourglass/hourglassConfig.cmake; do
  [ -f "$prefix/$f" ] || fail "$f not installed under $prefix"
done
bash -n "$prefix/share/bash-completion/completions/hourglass"

cmake -S "$src/tests/package/consumer" -B "$work/consumer" -G Ninja \
  -DCMAKE_PREFIX_PATH="$prefix" > "$work/consumer-configure.log" ||
  { cat "$work/consumer-configure.log"; fail "find_package(hourglass) failed"; }
cmake --build "$work/consumer" > "$work/consumer-build.log" ||
  { cat "$work/consumer-build.log"; fail "the consumer did not build"; }
out=$("$work/consumer/consumer")
expected="add 2 4 6; relu sum 6, grad 0 1 0 1; epochs 3"
[ "$out" = "$expected" ] || fail "the consumer printed '$out', expected '$expected'"

cpack --config "$build/CPackConfig.cmake" -B "$work/packages" > "$work/cpack.log" ||
  { cat "$work/cpack.log"; fail "cpack failed"; }
cli=$(ls "$work"/packages/hourglass_*_amd64.deb)
dev=$(ls "$work"/packages/hourglass-dev_*_amd64.deb)
depends=$(dpkg-deb -f "$cli" Depends)
[[ $depends == *libdnnl2* && $depends == *libgomp1* ]] || fail "$cli depends on '$depends'"
dpkg-deb -c "$cli" > "$work/cli.list"
dpkg-deb -c "$dev" > "$work/dev.list"
grep -q '\./usr/bin/hourglass$' "$work/cli.list" || fail "$cli has no /usr/bin/hourglass"
grep -q 'bash-completion/completions/hourglass$' "$work/cli.list" || fail "$cli has no completion"
grep -q 'cmake/hourglass/hourglassConfig.cmake$' "$work/dev.list" || fail "$dev has no CMake package"
grep -q 'libhourglass_ops.a$' "$work/dev.list" || fail "$dev has no libraries"
# The package unpacked into a fresh root (as dpkg would install it, without the database): its
# command runs and trains the installed quickstart config, cut short, on Debian's Fashion-MNIST.
root=$work/root
dpkg-deb -x "$cli" "$root"
"$root/usr/bin/hourglass" --version > "$work/version.txt"
grep -q "^hourglass " "$work/version.txt" ||
  fail "the packaged hourglass --version printed: $(cat "$work/version.txt")"
if [ -d /usr/share/datasets/fashion-mnist ]; then
  "$root/usr/bin/hourglass" train "$root/usr/share/hourglass/configs/quickstart.toml" \
    --set train.epochs=1 --set data.train_limit=512 --set data.test_limit=256 \
    --run-dir "$work/quickstart" --no-progress > "$work/quickstart.log" 2>&1 ||
    { cat "$work/quickstart.log"; fail "the packaged command did not train the quickstart config"; }
  [ -f "$work/quickstart/final.safetensors" ] || fail "the quickstart run left no final.safetensors"
  trained="trained the quickstart config"
else
  trained="the quickstart config not run (no /usr/share/datasets/fashion-mnist)"
fi
echo "check_install: installed, consumed ($out), packaged ($(basename "$cli"), $(basename "$dev")), unpacked; $trained"
