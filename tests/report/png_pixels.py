#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Count the pixels of a PNG that have given colours (the HTML report's
screenshot check, tests/unit/test_tier_report.c). Standard library only:
zlib and the five PNG row filters; 8-bit RGB or RGBA, not interlaced.

usage: png_pixels.py FILE RRGGBB [RRGGBB...]
prints "WIDTH HEIGHT" then one count per colour, a line each (a pixel
counts when every channel is within 8 of the colour's). Exit 2 on a PNG
it cannot read, with one message."""
import struct
import sys
import zlib

TOL = 8


def read_png(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, hdr = 8, [], None
    while pos + 8 <= len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
        pos += 12 + n
    if not hdr:
        raise ValueError("no IHDR chunk")
    w, h, depth, ctype, _, _, interlace = hdr
    if depth != 8 or ctype not in (2, 6) or interlace:
        raise ValueError("only 8-bit RGB/RGBA, not interlaced (got depth %d, type %d)"
                         % (depth, ctype))
    return w, h, 3 if ctype == 2 else 4, zlib.decompress(b"".join(idat))


def unfilter(w, h, bpp, raw):
    stride = w * bpp
    prev = bytearray(stride)
    pos = 0
    for _ in range(h):
        ftype = raw[pos]
        line = bytearray(raw[pos + 1:pos + 1 + stride])
        pos += 1 + stride
        if ftype == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 255
        elif ftype == 2:
            line = bytearray((a + b) & 255 for a, b in zip(line, prev))
        elif ftype == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 255
        elif ftype == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b = prev[i]
                c = prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        elif ftype != 0:
            raise ValueError("bad row filter %d" % ftype)
        yield line
        prev = line


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip().splitlines()[3], file=sys.stderr)
        return 2
    try:
        want = [tuple(int(c[i:i + 2], 16) for i in (0, 2, 4)) for c in argv[2:]]
        w, h, bpp, raw = read_png(argv[1])
        counts = [0] * len(want)
        for line in unfilter(w, h, bpp, raw):
            for x in range(0, w * bpp, bpp):
                r, g, b = line[x], line[x + 1], line[x + 2]
                for k, (wr, wg, wb) in enumerate(want):
                    if abs(r - wr) <= TOL and abs(g - wg) <= TOL and abs(b - wb) <= TOL:
                        counts[k] += 1
    except (OSError, ValueError, zlib.error) as e:
        print("png_pixels.py: %s: %s" % (argv[1], e), file=sys.stderr)
        return 2
    print(w, h)
    for c in counts:
        print(c)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
