# SPDX-License-Identifier: MIT
# make test-vm: the project on the real Linux NUMA / HMAT / CXL code, in two
# QEMU machines (TCG) booted on a stock Debian kernel. Installs what it
# needs (root / sudo, apt); skips with a message, exit 0, where it cannot.
# Owner: the VM test bed. See docs/vm-testbed.md.

# mk/*.mk are read before the main Makefile's first target: keep `all` default.
.DEFAULT_GOAL := all

VM_CHECK := $(BUILD)/tests/vm/vm_check

# The guest's placement check; not instrumented (a sanitizer runtime is not
# in the guest), not part of `all`.
$(VM_CHECK): tests/vm/vm_check.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(filter-out $(SANFLAGS) -fPIC,$(CFLAGS)) -o $@ $< -ldl

.PHONY: test-vm
test-vm: $(LIBKVTIER) $(KVTIER) $(FAKECUDA_LIBS) $(BUILD)/tests/progs/place_probe $(VM_CHECK)
	@tests/vm/run.sh $(BUILD)
