build/obj/preload/hook_table.o: preload/hook_table.c preload/kvt.h \
 include/kvtier/trace_format.h preload/hooks.h
preload/kvt.h:
include/kvtier/trace_format.h:
preload/hooks.h:
