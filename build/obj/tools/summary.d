build/obj/tools/summary.o: tools/summary.c tools/summary.h \
 include/kvtier/api.h include/kvtier/trace_format.h \
 include/kvtier/units.h tools/../profiler/trace_read.h
tools/summary.h:
include/kvtier/api.h:
include/kvtier/trace_format.h:
include/kvtier/units.h:
tools/../profiler/trace_read.h:
