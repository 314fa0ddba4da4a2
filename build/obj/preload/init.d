build/obj/preload/init.o: preload/init.c preload/kvt.h preload/record.h \
 include/kvtier/api.h include/kvtier/trace_format.h \
 preload/../profiler/registry.h preload/../profiler/trace.h
preload/kvt.h:
preload/record.h:
include/kvtier/api.h:
include/kvtier/trace_format.h:
preload/../profiler/registry.h:
preload/../profiler/trace.h:
