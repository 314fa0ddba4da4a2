build/obj/policy/parse.o: policy/parse.c include/kvtier/policy.h \
 include/kvtier/trace_format.h include/kvtier/units.h
include/kvtier/policy.h:
include/kvtier/trace_format.h:
include/kvtier/units.h:
