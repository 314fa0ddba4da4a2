build/obj/preload/platform.o: preload/platform.c preload/kvt.h \
 include/kvtier/trace_format.h
preload/kvt.h:
include/kvtier/trace_format.h:
