#!/usr/bin/env bash
# Device exploration for configs/fashion-mnist-speedrun.toml: a few variants, each run timed
# from process start, with its accuracy curve. Run after scripts/gpu-check.sh build.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device-env.sh
data="$PWD/.deb/root/usr/share/datasets/fashion-mnist"
out=${OUT:-build-device/out}/speedrun
mkdir -p "$out"
variant() {
  local name=$1; shift
  bash bench/speedrun.sh ./build-device/hourglass configs/fashion-mnist-speedrun.toml \
    "$out/$name" "$SEEDS" --set data.path="\"$data\"" "$@" > "$out/$name.txt" 2>&1
  echo "== $name ($*)"; cat "$out/$name.txt"
  python3 -c "
import json
for l in open('$out/$name/seed-1/metrics.jsonl'):
    j = json.loads(l); print(f\"  epoch {j['epoch']:2d} test {j['test_acc']:.4f} train {j['train_acc']:.4f} {j['epoch_seconds']:.2f}s\")
" 2>/dev/null | tr '\n' ';'; echo
}
SEEDS=${SEEDS:-1}
eval "${VARIANTS:-variant base}"
