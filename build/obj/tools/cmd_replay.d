build/obj/tools/cmd_replay.o: tools/cmd_replay.c tools/cmd.h \
 include/kvtier/policy.h include/kvtier/trace_format.h \
 tools/../profiler/registry.h tools/../profiler/trace_read.h
tools/cmd.h:
include/kvtier/policy.h:
include/kvtier/trace_format.h:
tools/../profiler/registry.h:
tools/../profiler/trace_read.h:
