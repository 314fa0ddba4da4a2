build/obj/preload/log.o: preload/log.c preload/kvt.h \
 include/kvtier/trace_format.h
preload/kvt.h:
include/kvtier/trace_format.h:
