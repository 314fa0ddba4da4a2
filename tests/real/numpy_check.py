#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""kvtier real-program check: numpy with multi-GiB arrays and threads.

Allocates two 1 GiB arrays (uint64 and float64), fills and transforms them
from a pool of threads (numpy releases the GIL in its loops), runs a BLAS
matrix product and prints checksums that are exact and independent of the
thread schedule (integer sums; float results combined in a fixed order).
With --mmap it also maps a 512 MiB anonymous buffer itself (mmap.mmap(-1))
and prints the NUMA policy /proc/self/numa_maps shows for it ("default"
natively, "prefer:N" when kvtier's bind:cxl rule placed it).

Peak memory: ~2.2 GiB (+0.5 GiB with --mmap). Must print the same bytes
with and without kvtier (apart from the numa_maps policy word)."""
import concurrent.futures as cf
import ctypes
import hashlib
import mmap
import sys

import numpy as np

GIB = 1 << 30
N = GIB // 8                 # elements per 1 GiB array
CHUNK = 1 << 21              # 2 Mi elements (16 MiB) per task
THREADS = 8


def numa_policy(addr):
    want = "%x" % addr
    with open("/proc/self/numa_maps") as f:
        for line in f:
            start, rest = line.split(" ", 1)
            if start == want:
                return rest.split()[0]
    return "missing"


def main():
    use_mmap = "--mmap" in sys.argv[1:]
    a = np.empty(N, dtype=np.uint64)
    b = np.empty(N, dtype=np.float64)

    def fill(lo):
        hi = min(lo + CHUNK, N)
        s = a[lo:hi]
        s[:] = np.arange(lo, hi, dtype=np.uint64)
        s *= np.uint64(0x9E3779B97F4A7C15)
        s ^= s >> np.uint64(29)
        b[lo:hi] = (s >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))
        return int(np.bitwise_xor.reduce(s)), int((s & np.uint64(0xFFFFFFFF)).sum())

    def work(lo):
        hi = min(lo + CHUNK, N)
        x = b[lo:hi]
        np.sqrt(x, out=x)
        x *= 1 << 20
        return int(np.floor(x).astype(np.uint64).sum())

    with cf.ThreadPoolExecutor(max_workers=THREADS) as ex:
        starts = range(0, N, CHUNK)
        xo, lsum = 0, 0
        for x_, s_ in ex.map(fill, starts):
            xo ^= x_
            lsum += s_
        wsum = sum(ex.map(work, starts))
    print("arrays: 2 x %d GiB, %d threads, %d chunks" % (N * 8 // GIB, THREADS, len(starts)))
    print("fill xor=%016x low32sum=%d" % (xo, lsum))
    print("sqrt floorsum=%d" % wsum)
    print("a[12345]=%d b[-1]=%s" % (int(a[12345]), float(b[-1]).hex()))
    m = b[: 512 * 512].reshape(512, 512)
    p = m @ m.T
    print("matmul trace=%s sha=%s" % (float(np.trace(p)).hex(),
                                      hashlib.sha256(p.tobytes()).hexdigest()[:16]))
    del a, b, m, p

    if use_mmap:
        size = 512 << 20
        buf = mmap.mmap(-1, size)
        addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
        print("mmapbuf numa policy=%s" % numa_policy(addr))
        v = np.frombuffer(buf, dtype=np.uint32)
        v[:] = np.arange(v.size, dtype=np.uint32)
        v *= np.uint32(2654435761)
        print("mmapbuf sum=%d sha=%s" % (int(v.sum(dtype=np.uint64)),
                                         hashlib.sha256(buf).hexdigest()[:16]))
        del v
        buf.close()
    print("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
