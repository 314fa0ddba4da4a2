build/obj/preload/init.o: preload/init.c include/kvtier/api.h \
 preload/kvt.h include/kvtier/trace_format.h preload/record.h \
 preload/../profiler/registry.h preload/../profiler/trace.h
include/kvtier/api.h:
preload/kvt.h:
include/kvtier/trace_format.h:
preload/record.h:
preload/../profiler/registry.h:
preload/../profiler/trace.h:
