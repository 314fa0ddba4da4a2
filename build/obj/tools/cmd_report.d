build/obj/tools/cmd_report.o: tools/cmd_report.c tools/cmd.h \
 tools/summary.h include/kvtier/api.h include/kvtier/trace_format.h \
 tools/../profiler/trace_read.h
tools/cmd.h:
tools/summary.h:
include/kvtier/api.h:
include/kvtier/trace_format.h:
tools/../profiler/trace_read.h:
