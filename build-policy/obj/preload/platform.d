build-policy/obj/preload/platform.o: preload/platform.c preload/kvt.h
preload/kvt.h:
