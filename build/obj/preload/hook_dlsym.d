build/obj/preload/hook_dlsym.o: preload/hook_dlsym.c preload/kvt.h \
 include/kvtier/trace_format.h preload/hooks.h
preload/kvt.h:
include/kvtier/trace_format.h:
preload/hooks.h:
