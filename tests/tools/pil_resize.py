"""Resizes a raw image with PIL for the resize tests.

Usage: pil_resize.py IN HEIGHT WIDTH CHANNELS TOP LEFT BOX_HEIGHT BOX_WIDTH OUT_HEIGHT OUT_WIDTH OUT

IN holds HEIGHT x WIDTH x CHANNELS uint8 values (1 channel: mode L, 3: RGB). The box (rows
TOP.., columns LEFT..) is cropped out, then resized with Image.resize(BILINEAR) (PIL's
antialiased bilinear filter), and the OUT_HEIGHT x OUT_WIDTH x CHANNELS result written to OUT.
"""
import sys

from PIL import Image


def main():
    src = sys.argv[1]
    h, w, c, top, left, bh, bw, oh, ow = (int(v) for v in sys.argv[2:11])
    with open(src, "rb") as f:
        data = f.read()
    image = Image.frombytes("L" if c == 1 else "RGB", (w, h), data)
    out = image.crop((left, top, left + bw, top + bh)).resize((ow, oh), Image.BILINEAR)
    with open(sys.argv[11], "wb") as f:
        f.write(out.tobytes())


if __name__ == "__main__":
    main()
