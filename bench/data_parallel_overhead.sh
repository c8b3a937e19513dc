#!/usr/bin/env bash
# What the data-parallel path costs on one GPU: `hourglass bench` alone against the same bench
# with --data-parallel (a one-rank NCCL communicator: gradient buckets all-reduced on the
# communicator's stream during backward, the update waiting for them), alternated so both see
# the same clocks, for CIFAR ResNet-18 (batch 512) and ResNet-50 at 224 px (batch 256), bf16,
# and for three bucket sizes on ResNet-18. Then the one-rank path end to end: `hourglass launch --nproc 1 --
# train` against a plain `hourglass train` on synthetic data. Prints a table: images/s, and the
# ratio data-parallel / alone (the issue's bound: at least 0.97).
#   bench/data_parallel_overhead.sh HOURGLASS OUT_DIR [REPEATS]
set -euo pipefail
hg=$1
out=$2
repeats=${3:-2}
mkdir -p "$out"
rate() { python3 -c 'import json,sys; print(f"{json.load(open(sys.argv[1]))["train_images_per_s"]:.0f}")' "$1"; }
echo "| model | batch | bucket MiB | alone img/s | data-parallel img/s | ratio |"
echo "| --- | --- | --- | --- | --- | --- |"
for spec in "resnet18-cifar 512 32 25_4_100" "resnet50 256 224 25"; do
  set -- $spec
  model=$1 batch=$2 size=$3 buckets=${4//_/ }
  common=(bench "$model" --device gpu:0 --batch "$batch" --size "$size" --precision bf16
          --steps 30 --rounds 3 --warmup 10 --json)
  for bucket in $buckets; do
    a=(); d=()
    for r in $(seq "$repeats"); do
      "$hg" "${common[@]}" > "$out/$model-alone-$bucket-$r.json"
      "$hg" "${common[@]}" --data-parallel --bucket-mb "$bucket" > "$out/$model-dp-$bucket-$r.json"
      a+=("$(rate "$out/$model-alone-$bucket-$r.json")")
      d+=("$(rate "$out/$model-dp-$bucket-$r.json")")
    done
    python3 - "$model" "$batch" "$bucket" "${a[*]}" "${d[*]}" <<'PY'
import statistics, sys
model, batch, bucket, a, d = sys.argv[1:]
a = [float(x) for x in a.split()]; d = [float(x) for x in d.split()]
ma, md = statistics.median(a), statistics.median(d)
print(f"| {model} | {batch} | {bucket} | {ma:.0f} ({' '.join(f'{x:.0f}' for x in a)}) | "
      f"{md:.0f} ({' '.join(f'{x:.0f}' for x in d)}) | {md / ma:.3f} |")
PY
  done
done

# End to end: plain train against one launched rank (NCCL), same config, two epochs each.
cfg="$out/e2e.toml"
cat > "$cfg" <<'TOML'
name = "dp-e2e"
device = "gpu:0"
precision = "bf16"
[model]
name = "resnet18"
[data]
dataset = "synthetic"
synthetic = { train_size = 51200, test_size = 5120, height = 32, width = 32, channels = 3, classes = 10 }
augment = true
placement = "device"
[optim]
name = "sgd"
lr = 0.1
momentum = 0.9
nesterov = true
[train]
epochs = 3
batch_size = 512
TOML
rm -rf "$out/e2e-plain" "$out/e2e-dp"
"$hg" train "$cfg" --run-dir "$out/e2e-plain" --no-progress > "$out/e2e-plain.log" 2>&1
"$hg" launch --nproc 1 -- train "$cfg" --run-dir "$out/e2e-dp" --no-progress > "$out/e2e-dp.log" 2>&1
python3 - "$out/e2e-plain/metrics.jsonl" "$out/e2e-dp/metrics.jsonl" <<'PY'
import json, sys
def later(path):
    lines = [json.loads(l) for l in open(path)]
    return sum(l["images_per_s"] for l in lines[1:]) / len(lines[1:]), lines[-1]["test_acc"]
(p, pa), (d, da) = later(sys.argv[1]), later(sys.argv[2])
print(f"| train e2e (epochs 2-3) | 512 | 25 | {p:.0f} (test_acc {pa:.4f}) | {d:.0f} (test_acc {da:.4f}) | {d / p:.3f} |")
PY
