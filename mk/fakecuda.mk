# SPDX-License-Identifier: MIT
# The SIMULATED CUDA driver (test double, never shipped): libcuda.so.1 and the
# CUPTI stand-in libcupti.so.13 under $(BUILD)/fakecuda, and their CUnit suites.
# Owner: the fakecuda driver. See docs/simulated-device.md.

# mk/*.mk are read before the main Makefile's first target: keep `all` default.
.DEFAULT_GOAL := all

FC_DRV_SRCS  := $(wildcard tests/fakecuda/cuda/*.c)
FC_DRV_OBJS  := $(FC_DRV_SRCS:%.c=$(BUILD)/obj/%.o)
FC_CUPTI_SRCS := $(wildcard tests/fakecuda/cupti/*.c)
FC_CUPTI_OBJS := $(FC_CUPTI_SRCS:%.c=$(BUILD)/obj/%.o)
FC_LIBCUDA   := $(BUILD)/fakecuda/libcuda.so.1
FC_LIBCUPTI  := $(BUILD)/fakecuda/libcupti.so.13

FAKECUDA_LIBS += $(FC_LIBCUDA) $(FC_LIBCUPTI)

# Raw export names and the old ABIs (cuMemAdvise with a CUdevice, ...).
$(FC_DRV_OBJS): CPPFLAGS += -D__CUDA_API_VERSION_INTERNAL
$(FC_CUPTI_OBJS): CPPFLAGS += -Itests/fakecuda/cuda

# -Bsymbolic: the resolver's pointers are our own exports even when a
# preloaded library defines the same names (pointer identity with dlsym).
$(FC_LIBCUDA): $(FC_DRV_OBJS)
	@mkdir -p $(dir $@)
	$(CC) -shared $(LDFLAGS) -Wl,-soname,libcuda.so.1 -Wl,-Bsymbolic -Wl,-z,now \
		-Wl,--no-undefined -o $@ $^ -lpthread

$(FC_LIBCUPTI): $(FC_CUPTI_OBJS)
	@mkdir -p $(dir $@)
	$(CC) -shared $(LDFLAGS) -Wl,-soname,libcupti.so.13 -Wl,-z,now \
		-Wl,--no-undefined -o $@ $^ -ldl -lpthread

# The suites dlopen the driver like libcudart does, so they link no kvtier code.
FC_SUITES := $(BUILD)/tests/unit/test_fakecuda $(BUILD)/tests/unit/test_fakecuda_env \
	     $(BUILD)/tests/unit/test_fakecuda_devices $(BUILD)/tests/unit/test_fakecuda_graphs \
	     $(BUILD)/tests/unit/test_fakecuda_hidden $(BUILD)/tests/unit/test_fakecuda_vtime \
	     $(BUILD)/tests/unit/test_fakecuda_kernels $(BUILD)/tests/unit/test_fakecuda_discard
$(FC_SUITES): $(BUILD)/tests/unit/%: tests/unit/%.c tests/unit/kvt_test.h tests/unit/fakecuda_drv.h \
		tests/fakecuda/fakecuda.h $(FC_LIBCUDA) $(FC_LIBCUPTI)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itests $(CFLAGS) $(LDFLAGS) -o $@ $< -lcunit -ldl -lpthread -lm

# test_fakecuda_devices, test_fakecuda_graphs, test_fakecuda_kernels and
# test_fakecuda_discard also dlopen the stand-in runtime (mk/fakecudart.mk).
$(BUILD)/tests/unit/test_fakecuda_devices $(BUILD)/tests/unit/test_fakecuda_graphs \
$(BUILD)/tests/unit/test_fakecuda_kernels \
$(BUILD)/tests/unit/test_fakecuda_discard: $(BUILD)/fakecuda/libcudart.so.13

.PHONY: fakecuda
fakecuda: $(FC_LIBCUDA) $(FC_LIBCUPTI) $(FC_SUITES)
