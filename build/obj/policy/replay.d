build/obj/policy/replay.o: policy/replay.c include/kvtier/policy.h \
 include/kvtier/trace_format.h include/kvtier/units.h
include/kvtier/policy.h:
include/kvtier/trace_format.h:
include/kvtier/units.h:
