#!/usr/bin/env bash
# CartPole-v1 PPO with CleanRL's hyperparameters (500,000 steps, 4 copies x 128 steps), hourglass
# (build/bench/bench_rl) beside PyTorch in CleanRL's structure (bench/torch_ppo.py, Debian's
# python3-torch run by /usr/bin/python3), seed by seed, alternating, in one run, on the same
# threads: training wall time, environment steps/s, and the mean return of 100 greedy
# evaluation episodes. Usage: bench/rl_vs_pytorch.sh [seeds] [total_steps]
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=${1:-5}
steps=${2:-500000}
threads=$(nproc)
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $threads threads; torch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)')"
echo "| engine | seed | env steps | train s | steps/s | eval mean return (100 episodes) |"
echo "| --- | --- | --- | --- | --- | --- |"
for seed in $(seq 1 "$seeds"); do
  OMP_NUM_THREADS=$threads ./build/bench/bench_rl ppo CartPole-v1 "$steps" "$seed" 1 | tail -1 | sed "s/^| hourglass | ppo | CartPole-v1 /| hourglass /"
  /usr/bin/python3 bench/torch_ppo.py --seed "$seed" --total-steps "$steps" --threads "$threads"
done
