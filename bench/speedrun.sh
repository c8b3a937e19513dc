#!/usr/bin/env bash
# Time to accuracy: trains CONFIG once per seed, each run timed as a user sees it (wall time
# from process start to exit, `hourglass train` included start-up, data loading, every
# evaluation and checkpoint), and prints each run's final test accuracy and seconds, then the
# mean accuracy and the slowest run.
#   bench/speedrun.sh HOURGLASS CONFIG OUT_DIR SEEDS [--set key=value ...]
# e.g. bench/speedrun.sh build/hourglass configs/fashion-mnist-speedrun.toml /tmp/sr 5
set -euo pipefail
hg=$1
config=$2
out=$3
seeds=$4
shift 4
mkdir -p "$out"
results=()
for seed in $(seq 1 "$seeds"); do
  run="$out/seed-$seed"
  rm -rf "$run"
  start=$(date +%s.%N)
  "$hg" train "$config" --run-dir "$run" --no-progress --set seed="$seed" "$@" \
    > "$out/seed-$seed.log" 2>&1 || { tail -20 "$out/seed-$seed.log"; exit 1; }
  end=$(date +%s.%N)
  acc=$(tail -1 "$run/metrics.jsonl" | python3 -c 'import json,sys; print(json.load(sys.stdin)["test_acc"])')
  secs=$(python3 -c "print(f'{$end - $start:.2f}')")
  epochs=$(wc -l < "$run/metrics.jsonl")
  # Where the time went: the first step's time after process start (train's log line), the
  # host's algorithm planning over the run (metrics.jsonl's planning_seconds) and the epochs.
  parts=$(python3 - "$out/seed-$seed.log" "$run/metrics.jsonl" <<'PY'
import json, re, sys
m = re.search(r"first training step issued ([0-9.]+) s", open(sys.argv[1]).read())
lines = [json.loads(l) for l in open(sys.argv[2])]
plan = sum(l.get("planning_seconds", 0) for l in lines)
ep = [l["epoch_seconds"] for l in lines]
first = f"{float(m.group(1)):.2f}" if m else "?"
print(f"first step {first} s, planning {plan:.2f} s, epochs {ep[0]:.2f} s then "
      f"{sum(ep[1:-1]) / max(1, len(ep) - 2):.2f} s, last (with the evaluation) {ep[-1]:.2f} s")
PY
)
  echo "seed $seed: test accuracy $acc after $epochs epochs, $secs s from process start ($parts)"
  results+=("$acc $secs")
done
printf '%s\n' "${results[@]}" | python3 -c '
import sys
rows = [tuple(map(float, l.split())) for l in sys.stdin if l.strip()]
accs = [a for a, _ in rows]
print(f"mean test accuracy {sum(accs) / len(accs):.4f} over {len(rows)} seeds "
      f"(min {min(accs):.4f}); slowest run {max(s for _, s in rows):.2f} s, "
      f"mean {sum(s for _, s in rows) / len(rows):.2f} s")'
