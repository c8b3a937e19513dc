#!/usr/bin/env python3
"""Reads a run directory's TensorBoard event files with TensorBoard's own reader.

    python3 tests/tools/read_tensorboard.py RUN_DIR [--expect-tag TAG ...]

Prints each scalar tag with its number of points and its first and last (step, value), read by
tensorboard.backend.event_processing's EventAccumulator from RUN_DIR/tensorboard (or RUN_DIR
itself when it holds the event files). Exits non-zero when TensorBoard finds no scalars, or
lacks a tag given with --expect-tag. Needs the `tensorboard` package (pip install tensorboard);
CTest does not run it: the C++ tests read the files back with their own reader
(tests/support/tfevents_reader.h).
"""
import argparse
import os
import sys


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir")
    parser.add_argument("--expect-tag", action="append", default=[],
                        help="a scalar tag that must be present (repeatable)")
    args = parser.parse_args()
    try:
        from tensorboard.backend.event_processing import event_accumulator
    except ImportError as e:
        print(f"read_tensorboard: the tensorboard package is needed ({e}); "
              "pip install tensorboard", file=sys.stderr)
        return 2
    path = os.path.join(args.run_dir, "tensorboard")
    if not os.path.isdir(path):
        path = args.run_dir
    files = sorted(f for f in os.listdir(path) if "tfevents" in f) if os.path.isdir(path) else []
    if not files:
        print(f"read_tensorboard: no event files in {path}", file=sys.stderr)
        return 1
    print(f"{path}: {len(files)} event file(s): {', '.join(files)}")
    acc = event_accumulator.EventAccumulator(
        path, size_guidance={event_accumulator.SCALARS: 0})  # 0: keep every point
    acc.Reload()
    tags = sorted(acc.Tags().get("scalars", []))
    if not tags:
        print(f"read_tensorboard: TensorBoard found no scalars in {path}", file=sys.stderr)
        return 1
    for tag in tags:
        events = acc.Scalars(tag)
        first, last = events[0], events[-1]
        print(f"{tag}: {len(events)} points, step {first.step} = {first.value:.6g} ... "
              f"step {last.step} = {last.value:.6g}")
    missing = [t for t in args.expect_tag if t not in tags]
    if missing:
        print(f"read_tensorboard: missing tags: {', '.join(missing)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
