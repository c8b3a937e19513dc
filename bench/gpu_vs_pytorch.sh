#!/usr/bin/env bash
# hourglass against PyTorch on the same GPU, in one run (see bench/README.md for results).
# Usage: bench/gpu_vs_pytorch.sh HOURGLASS_BINARY [OUT_DIR] [--quick] [--fp32] [--mixed]
#   ResNet-18 CIFAR, batch 512, 32x32, in fp32, tf32, bf16 and fp16: hourglass vs PyTorch eager
#   (autocast, channels-last); bf16 and fp16 also vs torch.compile. ResNet-50 224x224 batch 256 in bf16
#   and fp32 vs PyTorch eager channels-last. Synthetic device-resident data, SGD with Nesterov
#   momentum, both timed the same way (bench/torch_gpu.py's docstring). hourglass runs each
#   workload with eager steps and, for bf16 and fp16, again with whole-step graph replay
#   (--graph auto); ResNet-50 bf16 is also compared with torch.compile. Prints a Markdown table
#   last. --quick: fewer steps; --defaults: hourglass with its defaults (graph auto) in every
#   precision beside PyTorch eager only (no graph-off or torch.compile rows); --fp32: only the
#   two fp32 rows (TF32 off); --mixed: only the
#   bf16 and fp16 rows.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
hg=${1:?usage: gpu_vs_pytorch.sh HOURGLASS_BINARY [OUT_DIR] [--quick] [--fp32] [--mixed]}
out=${2:-bench-out}
shift $(( $# < 2 ? $# : 2 ))
steps=20; rounds=3; warmup=10; precisions="fp32 tf32 bf16 fp16"; r50_precisions="bf16 fp32"
defaults=0
for flag in "$@"; do
  case $flag in
    --quick) steps=10; rounds=2; warmup=5 ;;
    --defaults) defaults=1 ;;
    --fp32) precisions=fp32; r50_precisions=fp32 ;;
    --mixed) precisions="bf16 fp16"; r50_precisions=bf16 ;;
    "") ;;
    *) echo "gpu_vs_pytorch.sh: unknown option $flag" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"

run_hg() {   # name, args...  (stderr keeps cuDNN's engine choices: HOURGLASS_CUDNN_LOG)
  local name=$1; shift
  HOURGLASS_CUDNN_LOG=${HOURGLASS_CUDNN_LOG:-1} "$hg" bench "$@" --device gpu:0 --steps $steps \
    --rounds $rounds --warmup $warmup --json > "$out/$name.json" 2> "$out/$name.log" || echo '{}' > "$out/$name.json"
}
run_pt() {
  local name=$1; shift
  python3 "$here/torch_gpu.py" "$@" --steps $steps --rounds $rounds --warmup $warmup --json \
    > "$out/$name.json" 2> "$out/$name.log" || echo '{}' > "$out/$name.json"
}

rm -f "$out"/*.json
if [ $defaults = 1 ]; then
  # hourglass with its defaults (graph = "auto" in every precision) beside PyTorch eager, no
  # torch.compile: the memory and speed a user gets without flags.
  for p in $precisions; do
    run_hg "hgg-r18-$p" resnet18-cifar --batch 512 --precision $p --graph auto
    run_pt "pt-r18-$p" --model resnet18-cifar --batch 512 --precision $p --channels-last
  done
  for p in $r50_precisions; do
    run_hg "hgg-r50-$p" resnet50 --batch 256 --size 224 --precision $p --graph auto
    run_pt "pt-r50-$p" --model resnet50 --batch 256 --size 224 --precision $p --channels-last
  done
  precisions=""; r50_precisions=""
fi
for p in $precisions; do
  run_hg "hg-r18-$p" resnet18-cifar --batch 512 --precision $p --graph off
  case $p in bf16|fp16) run_hg "hgg-r18-$p" resnet18-cifar --batch 512 --precision $p --graph auto ;; esac
  run_pt "pt-r18-$p" --model resnet18-cifar --batch 512 --precision $p --channels-last
done
for p in bf16 fp16; do
  case " $precisions " in *" $p "*)
    run_pt "ptc-r18-$p" --model resnet18-cifar --batch 512 --precision $p --channels-last --compile ;;
  esac
done
for p in $r50_precisions; do
  run_hg "hg-r50-$p" resnet50 --batch 256 --size 224 --precision $p --graph off
  [ "$p" = bf16 ] && run_hg "hgg-r50-$p" resnet50 --batch 256 --size 224 --precision $p --graph auto
  run_pt "pt-r50-$p" --model resnet50 --batch 256 --size 224 --precision $p --channels-last
done
case " $r50_precisions " in *" bf16 "*)
  run_pt "ptc-r50-bf16" --model resnet50 --batch 256 --size 224 --precision bf16 --channels-last --compile ;;
esac

python3 - "$out" <<'PY'
import json, sys, os
out = sys.argv[1]
def load(n):
    try:
        return json.load(open(os.path.join(out, n + ".json")))
    except Exception:
        return {}
def ips(r): return r.get("train_images_per_s", 0.0)
def gib(r): return r.get("peak_memory_gib", 0.0)
rows = []
for p in ["fp32", "tf32", "bf16", "fp16"]:
    compiled = f"ptc-r18-{p}" if p in ("bf16", "fp16") else None
    rows.append((f"ResNet-18 CIFAR b512 {p}", f"hg-r18-{p}", f"pt-r18-{p}", compiled))
    rows.append((f"ResNet-18 CIFAR b512 {p}, graph replay", f"hgg-r18-{p}", f"pt-r18-{p}", compiled))
for p in ["bf16", "fp32"]:
    compiled = "ptc-r50-bf16" if p == "bf16" else None
    rows.append((f"ResNet-50 224 b256 {p}", f"hg-r50-{p}", f"pt-r50-{p}", compiled))
    rows.append((f"ResNet-50 224 b256 {p}, graph replay", f"hgg-r50-{p}", f"pt-r50-{p}", compiled))
rows = [r for r in rows if os.path.exists(os.path.join(out, r[1] + ".json"))]
dev = next((load(r[2]).get("device") for r in rows if load(r[2]).get("device")), "?")
ver = next((load(r[2]).get("version") for r in rows if load(r[2]).get("version")), "?")
print(f"GPU: {dev}; PyTorch {ver}")
print("| workload | hourglass img/s | PyTorch eager img/s | ratio | torch.compile img/s | ratio | peak GiB hourglass / PyTorch |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for title, h, e, c in rows:
    H, E = load(h), load(e)
    C = load(c) if c else {}
    ratio = f"{ips(H)/ips(E):.2f}x" if ips(E) and ips(H) else "-"
    cr = f"{ips(H)/ips(C):.2f}x" if ips(C) and ips(H) else "-"
    print(f"| {title} | {ips(H):,.0f} | {ips(E):,.0f} | {ratio} | "
          f"{(f'{ips(C):,.0f}' if C else '-')} | {cr} | {gib(H):.2f} / {gib(E):.2f} |")
PY
