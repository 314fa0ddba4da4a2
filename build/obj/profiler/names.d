build/obj/profiler/names.o: profiler/names.c include/kvtier/api.h \
 include/kvtier/trace_format.h
include/kvtier/api.h:
include/kvtier/trace_format.h:
