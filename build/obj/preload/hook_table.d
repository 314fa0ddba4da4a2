build/obj/preload/hook_table.o: preload/hook_table.c preload/kvt.h \
 preload/hooks.h
preload/kvt.h:
preload/hooks.h:
