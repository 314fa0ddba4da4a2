build/obj/preload/options.o: preload/options.c preload/kvt.h \
 include/kvtier/trace_format.h include/kvtier/units.h
preload/kvt.h:
include/kvtier/trace_format.h:
include/kvtier/units.h:
