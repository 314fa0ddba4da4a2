# SPDX-License-Identifier: MIT
# The traced-allocation row with Python frames: cudaMalloc+cudaFree pairs of
# the stand-in runtime through ctypes.PyDLL (the GIL held) from DEPTH nested
# Python calls, timed in Python; prints "ns_per_pair=N". Run it under kvtier
# with KVTIER_PYTHON=1 and =0 (bench/py_callsite.sh) and natively: the
# difference is what recording the Python frames adds per traced pair.
#   py_callsite.py LIBCUDART PAIRS DEPTH
import ctypes
import sys
import time

rt = ctypes.PyDLL(sys.argv[1])
pairs, depth = int(sys.argv[2]), int(sys.argv[3])


def loop():
    p = ctypes.c_void_p()
    ref, size = ctypes.byref(p), ctypes.c_size_t(1 << 20)
    t0 = time.perf_counter_ns()
    for _ in range(pairs):
        if rt.cudaMalloc(ref, size) or rt.cudaFree(p):
            sys.exit("cudaMalloc/cudaFree failed")
    return time.perf_counter_ns() - t0


def nest(n):
    return nest(n - 1) if n > 0 else loop()


loop()                       # warm up: the first call sites are new stacks
print("ns_per_pair=%d" % (nest(depth) // pairs))
