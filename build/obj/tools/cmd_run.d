build/obj/tools/cmd_run.o: tools/cmd_run.c tools/cmd.h tools/summary.h \
 include/kvtier/api.h include/kvtier/trace_format.h
tools/cmd.h:
tools/summary.h:
include/kvtier/api.h:
include/kvtier/trace_format.h:
