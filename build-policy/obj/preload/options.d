build-policy/obj/preload/options.o: preload/options.c preload/kvt.h \
 include/kvtier/units.h
preload/kvt.h:
include/kvtier/units.h:
