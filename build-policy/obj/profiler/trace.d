build-policy/obj/profiler/trace.o: profiler/trace.c \
 profiler/../preload/kvt.h profiler/trace.h include/kvtier/trace_format.h
profiler/../preload/kvt.h:
profiler/trace.h:
include/kvtier/trace_format.h:
