build/obj/tools/kvtier.o: tools/kvtier.c tools/cmd.h \
 tools/../preload/kvt.h include/kvtier/trace_format.h
tools/cmd.h:
tools/../preload/kvt.h:
include/kvtier/trace_format.h:
