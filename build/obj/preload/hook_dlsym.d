build/obj/preload/hook_dlsym.o: preload/hook_dlsym.c preload/kvt.h \
 preload/hooks.h
preload/kvt.h:
preload/hooks.h:
