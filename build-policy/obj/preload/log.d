build-policy/obj/preload/log.o: preload/log.c preload/kvt.h
preload/kvt.h:
