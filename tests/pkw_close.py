#!/usr/bin/env python3
# pkw_close.py A.pkw B.pkw [TOL] — every tensor of A within TOL (default 1e-4) of B's,
# relative to B's largest magnitude in that tensor; the same names in the same order.
# Exit 1 naming the first tensor that is not. (The .pkw layout: docs/runtime.md.)
import struct
import sys


def read(path):
    d = open(path, "rb").read()
    assert d[:4] == b"PKW1", path
    (n,), pos, out = struct.unpack_from("<I", d, 4), 8, {}
    for _ in range(n):
        (l,) = struct.unpack_from("<H", d, pos)
        name = d[pos + 2:pos + 2 + l].decode()
        pos += 2 + l
        dt, rank = struct.unpack_from("<BB", d, pos)
        pos += 2
        shape = struct.unpack_from("<%dq" % rank, d, pos)
        pos += 8 * rank
        cnt = 1
        for s in shape:
            cnt *= s
        fmt, size = ("<%df" % cnt, 4) if dt == 1 else ("<%dd" % cnt, 8)
        out[name] = struct.unpack_from(fmt, d, pos)
        pos += cnt * size
    return out


a, b = read(sys.argv[1]), read(sys.argv[2])
tol = float(sys.argv[3]) if len(sys.argv) > 3 else 1e-4
if list(a) != list(b):
    sys.exit("different tensors: %s vs %s" % (list(a), list(b)))
worst = 0.0
for k in a:
    scale = max(abs(v) for v in b[k]) or 1.0
    err = max(abs(x - y) for x, y in zip(a[k], b[k])) / scale
    if err > tol:
        sys.exit("%s: %g > %g" % (k, err, tol))
    worst = max(worst, err)
print("worst %g" % worst)
