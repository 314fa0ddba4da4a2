build/obj/preload/hook_resolver.o: preload/hook_resolver.c \
 preload/hook_driver.h /usr/local/cuda/include/cuda.h preload/kvt.h \
 include/kvtier/trace_format.h preload/hooks.h preload/record.h \
 include/kvtier/api.h preload/../profiler/registry.h
preload/hook_driver.h:
/usr/local/cuda/include/cuda.h:
preload/kvt.h:
include/kvtier/trace_format.h:
preload/hooks.h:
preload/record.h:
include/kvtier/api.h:
preload/../profiler/registry.h:
