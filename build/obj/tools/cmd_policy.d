build/obj/tools/cmd_policy.o: tools/cmd_policy.c tools/cmd.h \
 include/kvtier/policy.h include/kvtier/trace_format.h
tools/cmd.h:
include/kvtier/policy.h:
include/kvtier/trace_format.h:
