"""torchvision's augmentation ops on given images, for the augmentation tests.

Usage: torchvision_augment_ops.py CASES.json

CASES.json: {"images": [{"h": H, "w": W, "c": C, "pixels": [HWC uint8 values]}, ...],
             "cases": [{"image": i, "op": NAME, "magnitude": m}, ...]}
where NAME is an op of torchvision.transforms.autoaugment's _apply_op (ShearX, ..., Equalize)
or adjust_brightness, adjust_contrast, adjust_saturation, adjust_hue (the functional op with
factor m). Prints JSON {"outputs": [[HWC uint8 values], ...], "spaces": {...}}: each case's
output on its uint8 image (nearest-neighbour resampling, fill None), and the magnitude tables
of TrivialAugmentWide and RandAugment (31 bins, magnitude index over the bins, 28x28 and 32x32
images) as torchvision builds them.
"""
import json
import sys

import torch
from torchvision.transforms import InterpolationMode
from torchvision.transforms import autoaugment
from torchvision.transforms import functional as F


def main():
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    images = []
    for im in spec["images"]:
        t = torch.tensor(im["pixels"], dtype=torch.uint8).view(im["h"], im["w"], im["c"])
        images.append(t.permute(2, 0, 1).contiguous())
    outputs = []
    for case in spec["cases"]:
        img = images[case["image"]]
        op, m = case["op"], float(case["magnitude"])
        if op.startswith("adjust_"):
            out = getattr(F, op)(img, m)
        else:
            out = autoaugment._apply_op(img, op, m, InterpolationMode.NEAREST, None)
        outputs.append(out.permute(1, 2, 0).reshape(-1).tolist())
    spaces = {}
    for size in (28, 32):
        wide = autoaugment.TrivialAugmentWide()._augmentation_space(31)
        rand = autoaugment.RandAugment()._augmentation_space(31, (size, size))
        for name, space in (("trivial_augment_wide", wide), ("rand_augment", rand)):
            spaces[f"{name}_{size}"] = {
                op: {"signed": bool(signed),
                     "values": [float(v) for v in mags.reshape(-1).tolist()] if mags.ndim else []}
                for op, (mags, signed) in space.items()
            }
    print(json.dumps({"outputs": outputs, "spaces": spaces}))


if __name__ == "__main__":
    main()
