build/obj/profiler/trace.o: profiler/trace.c profiler/../preload/kvt.h \
 include/kvtier/trace_format.h profiler/trace.h
profiler/../preload/kvt.h:
include/kvtier/trace_format.h:
profiler/trace.h:
