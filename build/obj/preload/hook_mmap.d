build/obj/preload/hook_mmap.o: preload/hook_mmap.c preload/kvt.h \
 include/kvtier/trace_format.h preload/record.h include/kvtier/api.h \
 preload/../profiler/registry.h
preload/kvt.h:
include/kvtier/trace_format.h:
preload/record.h:
include/kvtier/api.h:
preload/../profiler/registry.h:
