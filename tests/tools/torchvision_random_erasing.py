"""Draws torchvision's RandomErasing rectangles for the transform tests.

Usage: torchvision_random_erasing.py HEIGHT WIDTH COUNT SCALE_MIN SCALE_MAX RATIO_MIN RATIO_MAX

Prints JSON {"h": [...], "w": [...], "y0": [...], "x0": [...]}: COUNT rectangles from
torchvision.transforms.RandomErasing.get_params on a 1 x HEIGHT x WIDTH image, with h = w = 0
where no try fitted (get_params then returns the whole image, which erasing leaves unchanged).
"""
import json
import sys

import torch
from torchvision import transforms


def main():
    height, width, count = (int(v) for v in sys.argv[1:4])
    scale = (float(sys.argv[4]), float(sys.argv[5]))
    ratio = (float(sys.argv[6]), float(sys.argv[7]))
    torch.manual_seed(0)
    image = torch.zeros(1, height, width)
    out = {"h": [], "w": [], "y0": [], "x0": []}
    for _ in range(count):
        i, j, h, w, _ = transforms.RandomErasing.get_params(image, scale=scale, ratio=ratio,
                                                            value=[0])
        if h == height and w == width:
            i = j = h = w = 0
        out["h"].append(int(h))
        out["w"].append(int(w))
        out["y0"].append(int(i))
        out["x0"].append(int(j))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
