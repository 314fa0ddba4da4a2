build/obj/profiler/trace_read.o: profiler/trace_read.c \
 profiler/trace_read.h include/kvtier/trace_format.h
profiler/trace_read.h:
include/kvtier/trace_format.h:
