# SPDX-License-Identifier: MIT
# A Python "server" for tests/unit/test_pyframes.c: allocates device memory
# through the CUDA stand-in runtime with ctypes, from named functions, so
# that kvtier's call sites carry Python frames.
#   py_alloc.py LIBCUDART gil     ctypes.PyDLL: the GIL is held in cudaMalloc
#   py_alloc.py LIBCUDART nogil   ctypes.CDLL: the GIL is released around it
#   py_alloc.py LIBCUDART thread  as gil, from a threading.Thread
#   py_alloc.py LIBCUDART atexit  as gil, from an atexit handler (interpreter ending)
#   py_alloc.py LIBCUDART fork    as gil, in a forked child, then in the parent
# Prints "kv_line=N" and "other_line=N": the lines of the two cudaMalloc calls.
import atexit
import ctypes
import os
import sys
import threading

MiB = 1 << 20
lib_path, mode = sys.argv[1], sys.argv[2]
rt = (ctypes.CDLL if mode == "nogil" else ctypes.PyDLL)(lib_path)


def cuda_malloc(size):
    p = ctypes.c_void_p()
    err = rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(size))
    if err != 0:
        sys.exit("cudaMalloc failed: %d" % err)
    return p


def allocate_kv_cache_tensors():
    p = ctypes.c_void_p()
    err = rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(64 * MiB))  # kvt: kv
    if err != 0:
        sys.exit("cudaMalloc failed: %d" % err)
    return p


def other_alloc():
    p = ctypes.c_void_p()
    err = rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(32 * MiB))  # kvt: other
    if err != 0:
        sys.exit("cudaMalloc failed: %d" % err)
    return p


def marker_line(tag):
    with open(__file__) as f:
        for n, text in enumerate(f, 1):
            if text.rstrip().endswith("# kvt: " + tag):
                return n
    return 0


def main():
    print("kv_line=%d" % marker_line("kv"))
    print("other_line=%d" % marker_line("other"))
    sys.stdout.flush()
    if mode == "thread":
        t = threading.Thread(target=allocate_kv_cache_tensors)
        t.start()
        t.join()
        other_alloc()
    elif mode == "atexit":
        atexit.register(allocate_kv_cache_tensors)
        other_alloc()
    elif mode == "fork":
        pid = os.fork()
        if pid == 0:
            allocate_kv_cache_tensors()
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        if status != 0:
            sys.exit("child failed: %d" % status)
        other_alloc()
    else:
        allocate_kv_cache_tensors()
        other_alloc()


main()
