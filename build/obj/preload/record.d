build/obj/preload/record.o: preload/record.c preload/kvt.h \
 include/kvtier/trace_format.h preload/record.h include/kvtier/api.h \
 preload/../profiler/registry.h preload/../profiler/trace.h
preload/kvt.h:
include/kvtier/trace_format.h:
preload/record.h:
include/kvtier/api.h:
preload/../profiler/registry.h:
preload/../profiler/trace.h:
