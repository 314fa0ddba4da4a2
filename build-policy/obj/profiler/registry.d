build-policy/obj/profiler/registry.o: profiler/registry.c \
 profiler/../preload/kvt.h profiler/registry.h
profiler/../preload/kvt.h:
profiler/registry.h:
