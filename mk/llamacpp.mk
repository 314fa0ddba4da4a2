# SPDX-License-Identifier: MIT
# llama.cpp, unmodified, on the real-GPU check (issue 25; tests/gpu/llamacpp.sh).
# Outside CI (CI cannot fetch llama.cpp's source; kvtier never vendors it):
#   make test-llamacpp-cpu LLAMACPP_SRC=build/llamacpp-src
#                     a CPU-only build of llama-cli and llama-batched-bench
#                     from that source (commit named in tests/gpu/llamacpp.sh),
#                     the tiny model tests/gpu/make_gguf.py writes: it loads,
#                     and greedy generation gives the same tokens every run;
#                     one line and no failure when LLAMACPP_SRC is unset (or
#                     names no llama.cpp source, or cmake is missing)
#   make gpu-llamacpp LLAMACPP_SRC=...   its CUDA build (sm_90) and the model
#                     into $(GPU_BUILD)/llamacpp, which `make gpu-bundle` then
#                     carries; LLAMACPP_JOBS (default 1) parallel compiles
# Both need cmake and, for the model, a Python with numpy (LLAMACPP_PYTHON,
# else python3 or /usr/bin/python3) plus the source's gguf-py.
.PHONY: test-llamacpp-cpu gpu-llamacpp

test-llamacpp-cpu:
	@if [ -z "$(LLAMACPP_SRC)" ]; then \
		echo "test-llamacpp-cpu: SKIP: LLAMACPP_SRC is unset (the llama.cpp source; see tests/gpu/llamacpp.sh)"; \
	else \
		LLAMACPP_SRC="$(LLAMACPP_SRC)" LLAMACPP_PYTHON="$(LLAMACPP_PYTHON)" tests/gpu/llamacpp.sh cpu; \
		rc=$$?; [ $$rc = 77 ] || exit $$rc; \
	fi

gpu-llamacpp:
	LLAMACPP_SRC="$(LLAMACPP_SRC)" LLAMACPP_PYTHON="$(LLAMACPP_PYTHON)" CUDA_HOME=$(CUDA_HOME) \
		GPU_BUILD=$(GPU_BUILD) tests/gpu/llamacpp.sh build
