#!/usr/bin/env bash
# The op profile of a warm run's first training step (eager, the kernels' first launches in it): the
# ops by host time. Run on the GPU machine after `gpu-check.sh build tune` (its cache and data).
d=build-device/prof1; rm -rf $d
HOURGLASS_CACHE_DIR=build-device/logs/first-step/cache ./build-device/hourglass train configs/cifar10-resnet18.toml --run-dir $d --no-progress --set device='"gpu:0"' --set precision='"bf16"' --set train.epochs=1 --set data.path='"build-device/cifar-10-batches-bin"' --set data.placement='"device"' --set profile.enabled=true --set profile.after=0 --set profile.steps=1 > $d.log 2>&1; tail -3 $d.log
grep -h "first training" $d/train.log | cut -c1-300
python3 - <<'PY'
import json, collections
d = json.load(open('build-device/prof1/trace.json'))
ev = [e for e in d['traceEvents'] if e.get('ph') == 'X' and e.get('tid') == 1]
print('host ops', len(ev), 'total ms', round(sum(e['dur'] for e in ev) / 1e3, 1))
by = collections.defaultdict(lambda: [0, 0.0])
for e in ev:
    by[e['name']][0] += 1; by[e['name']][1] += e['dur']
for n, (c, t) in sorted(by.items(), key=lambda x: -x[1][1])[:12]: print(f'{t/1e3:8.1f} ms {c:4d} {n}')
for e in sorted(ev, key=lambda e: -e['dur'])[:12]: print(round(e['dur'] / 1e3, 2), e['name'], e.get('args', {}))
PY
