#!/usr/bin/env bash
# How well `hourglass plan` predicts an epoch: plans a config (timing its training step,
# evaluation and checkpoint on this machine), then trains it and compares the predicted
# seconds per epoch with metrics.jsonl's epoch_seconds (the first epoch, which pays for
# warm-up and the GPU's algorithm search, apart from the mean of the later ones).
# Usage: bench/plan_vs_run.sh HOURGLASS CONFIG [OUT_DIR] [--set key=value ...]
set -uo pipefail
hg=${1:?usage: plan_vs_run.sh HOURGLASS CONFIG [OUT_DIR] [--set ...]}
config=${2:?usage: plan_vs_run.sh HOURGLASS CONFIG [OUT_DIR] [--set ...]}
out=${3:-plan-vs-run}
shift 3 2>/dev/null || shift $#
mkdir -p "$out"
name=$(basename "$config" .toml)
"$hg" plan "$config" "$@" > "$out/$name-plan.txt" 2> "$out/$name-plan.log"
rm -rf "$out/$name-run"
"$hg" train "$config" "$@" --run-dir "$out/$name-run" --no-progress > "$out/$name-train.txt" \
  2> "$out/$name-train.log"
python3 - "$out/$name-plan.txt" "$out/$name-run/metrics.jsonl" "$name" <<'PY'
import json, re, sys
plan, metrics, name = sys.argv[1:4]
m = re.search(r"epoch on this machine: ([0-9.]+) s \(training ([0-9.]+) s, evaluation ([0-9.]+) s, "
              r"checkpoint ([0-9.]+) s\)", open(plan).read())
if not m:
    sys.exit(f"{name}: no prediction in {plan}")
predicted = float(m.group(1))
epochs = [json.loads(l) for l in open(metrics) if l.strip()]
first = epochs[0]["epoch_seconds"]
later = [e["epoch_seconds"] for e in epochs[1:]] or [first]
mean_later = sum(later) / len(later)
print(f"| {name} | {predicted:.2f} (train {m.group(2)}, eval {m.group(3)}, ckpt {m.group(4)}) | "
      f"{first:.2f} | {mean_later:.2f} over {len(later)} | {(predicted / mean_later - 1) * 100:+.1f}% |")
PY
