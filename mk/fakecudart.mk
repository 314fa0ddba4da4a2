# SPDX-License-Identifier: MIT
# The stand-in CUDA runtime (test double): $(BUILD)/fakecuda/libcudart.so.13.
# Same soname and version node as the real libcudart.so.13, so binaries linked
# against the toolkit's runtime run against it with LD_LIBRARY_PATH.
FAKECUDART_SRCS := $(wildcard tests/fakecuda/cudart/*.c)
FAKECUDART_OBJS := $(FAKECUDART_SRCS:%.c=$(BUILD)/obj/%.o)
FAKECUDART      := $(BUILD)/fakecuda/libcudart.so.13

FAKECUDA_LIBS += $(FAKECUDART)

$(FAKECUDART): $(FAKECUDART_OBJS) tests/fakecuda/cudart/libcudart.map
	@mkdir -p $(dir $@)
	$(CC) -shared $(LDFLAGS) -Wl,-soname,libcudart.so.13 -Wl,-z,now -Wl,--no-undefined \
		-Wl,--version-script=tests/fakecuda/cudart/libcudart.map \
		-o $@ $(FAKECUDART_OBJS) -ldl -lpthread

.PHONY: fakecudart
fakecudart: $(FAKECUDART)
