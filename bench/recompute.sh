#!/usr/bin/env bash
# Activation recomputation on a GPU (issue 14): ResNet-50 bf16 batch 256 at 224 px, first
# plain (its peak memory from `hourglass bench --json`), then with --recompute auto under a
# --memory-limit of half that peak, then with every block recomputed and no limit (the cost of
# full recomputation). Prints a Markdown table: peak GiB, images/s, the ratio to the plain run,
# the micro-batch the step ran at (256: the limit was met by recomputation alone, not by the
# out-of-memory retry) and the blocks chosen. Done when the auto row keeps micro-batch 256 and
# a ratio of at least 0.75.   Usage: bench/recompute.sh HOURGLASS OUT [extra bench flags]
set -uo pipefail
hg=${1:?usage: recompute.sh HOURGLASS OUT [extra bench flags]}
out=${2:?usage: recompute.sh HOURGLASS OUT [extra bench flags]}
shift 2
mkdir -p "$out"
common=(resnet50 --batch 256 --size 224 --precision bf16 --device gpu:0 --steps 20 --rounds 3
        --warmup 5 --json "$@")
run() {  # name, extra flags...
  local name=$1; shift
  "$hg" bench "${common[@]}" "$@" > "$out/$name.json" 2> "$out/$name.log" || echo '{}' > "$out/$name.json"
}
run plain --recompute none
peak=$(python3 -c "import json; print(json.load(open('$out/plain.json')).get('peak_memory_gib', 0))")
limit_mib=$(python3 -c "print(int($peak * 1024 / 2))")
if [ "$limit_mib" -gt 0 ]; then
  run auto --recompute auto --memory-limit "${limit_mib}MiB"
else
  echo '{}' > "$out/auto.json"
fi
blocks=$(python3 -c "print(','.join(f'layer{s+1}.{b}' for s, n in enumerate([3, 4, 6, 3]) for b in range(n)))")
run all --recompute "$blocks"
python3 - "$out" "$limit_mib" <<'PY'
import json, os, sys
out, limit_mib = sys.argv[1], int(sys.argv[2])
def load(n):
    try: return json.load(open(os.path.join(out, n + ".json")))
    except Exception: return {}
plain = load("plain")
base = plain.get("train_images_per_s", 0)
print(f"ResNet-50 bf16 batch 256, 224 px; auto under --memory-limit {limit_mib} MiB "
      f"(half the plain peak)\n")
print("| run | peak GiB | img/s (ms/step) | ratio | micro-batch | recomputed blocks |")
print("| --- | --- | --- | --- | --- | --- |")
verdict = "FAIL"
for name in ["plain", "auto", "all"]:
    r = load(name)
    ips = r.get("train_images_per_s", 0)
    ratio = ips / base if ips and base else 0
    blocks = r.get("recompute", [])
    print(f"| {name} | {r.get('peak_memory_gib', 0):.2f} | {ips:,.0f} ({r.get('train_step_ms', 0):.1f}) "
          f"| {ratio:.3f} | {r.get('micro_batch', '-')} | {len(blocks)}: {' '.join(blocks)} |")
    if name == "auto" and r.get("micro_batch") == 256 and ratio >= 0.75 and \
            r.get("peak_memory_gib", 1e9) * 1024 <= limit_mib:
        verdict = "PASS"
print(f"\nauto: {verdict} (needs micro-batch 256, peak within the limit, ratio >= 0.75)")
PY
