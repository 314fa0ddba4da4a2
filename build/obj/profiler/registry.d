build/obj/profiler/registry.o: profiler/registry.c \
 profiler/../preload/kvt.h include/kvtier/trace_format.h \
 profiler/registry.h
profiler/../preload/kvt.h:
include/kvtier/trace_format.h:
profiler/registry.h:
