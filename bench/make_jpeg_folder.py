#!/usr/bin/env python3
"""Writes a folder of ImageNet-sized JPEGs in the ImageNet layout (ROOT/train/class_k/*.jpg and
ROOT/val/class_k/*.jpg, a tenth as many): 500x375 (every third 375x500), smooth colour waves
plus noise at quality 90, about the size of a photo's JPEG. Images already there are kept.

    python3 bench/make_jpeg_folder.py ROOT IMAGES
"""
import os
import sys
from multiprocessing import Pool

import numpy as np
from PIL import Image

CLASSES = 10


def write(job):
    root, split, i = job
    path = os.path.join(root, split, f"class_{i % CLASSES}", f"img_{i:06d}.jpg")
    if os.path.exists(path):
        return
    rng = np.random.default_rng(i)
    h, w = (375, 500) if i % 3 else (500, 375)
    y, x = np.mgrid[0:h, 0:w]
    img = np.zeros((h, w, 3))
    for c in range(3):  # smooth structure plus noise: photo-like JPEG sizes
        fy, fx, ph = rng.uniform(0.005, 0.05, 2).tolist() + [rng.uniform(0, 6.3)]
        img[..., c] = 128 + 80 * np.sin(fy * y + fx * x + ph)
    img += rng.normal(0, 12, img.shape)
    Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(path, quality=90)


def main():
    root, n = sys.argv[1], int(sys.argv[2])
    jobs = [(root, "train", i) for i in range(n)] + [(root, "val", i) for i in range(n // 10)]
    for split in ("train", "val"):
        for c in range(CLASSES):
            os.makedirs(os.path.join(root, split, f"class_{c}"), exist_ok=True)
    with Pool(os.cpu_count()) as p:
        p.map(write, jobs, chunksize=64)


if __name__ == "__main__":
    main()
