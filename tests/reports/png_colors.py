#!/usr/bin/env python3
"""Prints what a PNG screenshot shows, for the headless-Chromium test of the
HTML report: its size, how many pixels are not white, and how many pixels
have each of the given colours (exactly, or within a small tolerance).

usage: png_colors.py FILE [RRGGBB...]
output: one line `width height nonwhite` then `RRGGBB count` per colour.
Decodes 8-bit RGB/RGBA non-interlaced PNGs (what Chromium writes) with zlib
alone."""
import struct
import sys
import zlib


def decode(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise SystemExit("not a PNG: " + path)
    pos, idat, width, height, ctype = 8, b"", 0, 0, 0
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            width, height, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or ctype not in (2, 6) or interlace:
                raise SystemExit("unsupported PNG: depth %d type %d interlace %d" % (depth, ctype, interlace))
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    bpp = 3 if ctype == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev, i = [], bytearray(stride), 0
    for _ in range(height):
        f, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if f == 1:
                line[x] = (line[x] + a) & 255
            elif f == 2:
                line[x] = (line[x] + b) & 255
            elif f == 3:
                line[x] = (line[x] + ((a + b) >> 1)) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, bpp, rows


def main():
    width, height, bpp, rows = decode(sys.argv[1])
    wanted = [tuple(int(h[k:k + 2], 16) for k in (0, 2, 4)) for h in sys.argv[2:]]
    counts = [0] * len(wanted)
    nonwhite = 0
    for row in rows:
        for x in range(0, width * bpp, bpp):
            r, g, b = row[x], row[x + 1], row[x + 2]
            if r < 245 or g < 245 or b < 245:
                nonwhite += 1
            for k, (wr, wg, wb) in enumerate(wanted):
                if abs(r - wr) <= 6 and abs(g - wg) <= 6 and abs(b - wb) <= 6:
                    counts[k] += 1
    print(width, height, nonwhite)
    for h, n in zip(sys.argv[2:], counts):
        print(h, n)


if __name__ == "__main__":
    main()
