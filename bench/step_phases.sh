#!/usr/bin/env bash
# Where a training step's time goes, hourglass beside PyTorch on the same GPU in one run: the
# device milliseconds a step of the forward pass, the backward pass and the optimizer, the
# kernels outside those, and the gaps (the measured step less all its kernels: an idle device).
# hourglass: `hourglass profile --timing kernels --json` (CUPTI; steps replayed as a graph, each
# op in the phase of the training step that called it, ops/op_profile.h); PyTorch eager and
# torch.compile: bench/torch_gpu.py --phases (torch.profiler, each kernel in the range open at
# its launch). CIFAR ResNet-18 b512 and ResNet-50 224 px b256, bf16, synthetic data on the device,
# SGD with Nesterov momentum and weight decay on both sides. A Markdown table last.
#   Usage: bench/step_phases.sh HOURGLASS OUT [--quick]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
hg=${1:?usage: step_phases.sh HOURGLASS OUT [--quick]}
out=${2:?usage: step_phases.sh HOURGLASS OUT [--quick]}
steps=20; warmup=10; phase_steps=10
[ "${3:-}" = --quick ] && { steps=5; warmup=5; phase_steps=3; }
mkdir -p "$out"
cfg="$here/../configs/synthetic-resnet50-gpu.toml"
workloads=("r18|resnet18-cifar|512|32|resnet18|cifar" "r50|resnet50|256|224|resnet50|imagenet")
for w in "${workloads[@]}"; do
  IFS='|' read -r name model batch size hg_model stem <<< "$w"
  "$hg" profile "$cfg" --set model.name="$hg_model" --set model.stem="$stem" \
    --set data.synthetic.height="$size" --set data.synthetic.width="$size" \
    --set train.batch_size="$batch" --set data.synthetic.train_size=$((batch * 4)) \
    --steps $steps --warmup $warmup --timing kernels --json > "$out/hg-$name.log" 2>&1
  grep '^{' "$out/hg-$name.log" | tail -1 > "$out/hg-$name.json"
  for mode in eager compile; do
    flag=; [ $mode = compile ] && flag=--compile
    python3 "$here/torch_gpu.py" --model "$model" --batch "$batch" --size "$size" \
      --precision bf16 --channels-last $flag --steps $steps --warmup $warmup --rounds 3 \
      --phases $phase_steps --json > "$out/pt-$mode-$name.log" 2>&1
    grep '^{' "$out/pt-$mode-$name.log" | tail -1 > "$out/pt-$mode-$name.json"
  done
done
python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
def load(n):
    try:
        return json.load(open(os.path.join(out, n + ".json")))
    except Exception:
        return {}
def hg_phases(r):
    p = {x["phase"]: x.get("ms_per_step", 0.0) for x in r.get("phases", [])}
    other = sum(v for k, v in p.items() if k not in ("forward", "backward", "update", "gaps"))
    return {"forward": p.get("forward"), "backward": p.get("backward"),
            "optimizer": p.get("update"), "other": other, "gaps": p.get("gaps"),
            "step": r.get("step_ms")}
def pt_phases(r):
    p = r.get("phases", {})
    return {"forward": p.get("forward"), "backward": p.get("backward"),
            "optimizer": p.get("optimizer"), "other": p.get("(outside ranges)"),
            "gaps": p.get("gaps"), "step": r.get("train_step_ms")}
def cell(v):
    return "-" if v is None else f"{v:.2f}"
titles = {"r18": "CIFAR ResNet-18 b512 bf16", "r50": "ResNet-50 224 b256 bf16"}
dev = load("pt-eager-r50").get("device") or load("pt-eager-r18").get("device") or "?"
print(f"GPU: {dev}; milliseconds a step (hourglass: profiled steps, graph replay; PyTorch: timed "
      "steps, phases from torch.profiler)")
print("| workload | phase | hourglass | PyTorch eager | torch.compile |")
print("| --- | --- | --- | --- | --- |")
for name in ["r18", "r50"]:
    h, e, c = hg_phases(load(f"hg-{name}")), pt_phases(load(f"pt-eager-{name}")), \
        pt_phases(load(f"pt-compile-{name}"))
    for ph, label in [("forward", "forward"), ("backward", "backward"),
                      ("optimizer", "optimizer (update)"), ("other", "kernels outside phases"),
                      ("gaps", "gaps (device idle)"), ("step", "step")]:
        print(f"| {titles[name]} | {label} | {cell(h[ph])} | {cell(e[ph])} | {cell(c[ph])} |")
PY
