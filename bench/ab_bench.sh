#!/usr/bin/env bash
# Two variants of `hourglass bench` alternated on a GPU, per workload and repeat: images/s, ms
# a step, peak MiB, the first variant over the second and the first's graph replays, a Markdown
# table last.
#   bench/ab_bench.sh HOURGLASS OUT REPEATS "LABEL|ENV|FLAGS" "LABEL|ENV|FLAGS" "NAME|ARGS"...
# A variant is a label, environment assignments (space-separated, may be empty) and bench
# flags (may be empty); a workload is a name and the bench arguments that make it. Used by
# bench/graph_replay.sh, bench/fused_bn.sh and bench/stem_space_to_depth.sh.
set -uo pipefail
usage="usage: ab_bench.sh HOURGLASS OUT REPEATS VARIANT_A VARIANT_B WORKLOAD..."
hg=${1:?$usage}; out=${2:?$usage}; repeats=${3:?$usage}
variants=("${4:?$usage}" "${5:?$usage}")
shift 5
[ $# -gt 0 ] || { echo "$usage" >&2; exit 2; }
mkdir -p "$out"
names=()
for w in "$@"; do
  name=${w%%|*}; args=${w#*|}; names+=("$name")
  for r in $(seq 1 "$repeats"); do
    for v in 0 1; do
      IFS='|' read -r _ envs flags <<< "${variants[$v]}"
      # shellcheck disable=SC2086
      env $envs "$hg" bench $args --device gpu:0 --steps 30 --rounds 3 --warmup 10 $flags --json \
        > "$out/$name-$v-$r.json" 2> "$out/$name-$v-$r.log" || echo '{}' > "$out/$name-$v-$r.json"
    done
  done
done
python3 - "$out" "$repeats" "${variants[0]%%|*}" "${variants[1]%%|*}" "${names[@]}" <<'PY'
import json, os, sys
out, repeats, a_label, b_label, names = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]
def load(n):
    try: return json.load(open(os.path.join(out, n + ".json")))
    except Exception: return {}
print(f"| workload | run | {a_label} img/s (ms/step) | {b_label} img/s (ms/step) | ratio | "
      f"peak MiB {a_label} / {b_label} | replays |")
print("| --- | --- | --- | --- | --- | --- | --- |")
mib = lambda j: f"{j['peak_memory_gib'] * 1024:.1f}" if "peak_memory_gib" in j else "-"
for name in names:
    for r in range(1, repeats + 1):
        a, b = load(f"{name}-0-{r}"), load(f"{name}-1-{r}")
        ia, ib = a.get("train_images_per_s", 0), b.get("train_images_per_s", 0)
        ratio = f"{ia / ib:.3f}" if ia and ib else "-"
        print(f"| {name} | {r} | {ia:,.0f} ({a.get('train_step_ms', 0):.2f}) | "
              f"{ib:,.0f} ({b.get('train_step_ms', 0):.2f}) | {ratio} | {mib(a)} / {mib(b)} | "
              f"{a.get('graph_replays', '-')} |")
PY
