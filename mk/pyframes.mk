# SPDX-License-Identifier: MIT
# Python call sites (owner: profiler/pyframes.c):
#   make bench-python   a traced cudaMalloc+cudaFree pair from Python with
#                       KVTIER_PYTHON=0 and =1 beside native (bench/py_callsite.sh);
#                       part of `make bench`, not yet a row of its table
.PHONY: bench-python
bench: bench-python
bench-python: $(LIBKVTIER) $(BUILD)/fakecuda/libcuda.so.1 $(BUILD)/fakecuda/libcudart.so.13
	@BUILD=$(BUILD) bench/py_callsite.sh
