build-policy/obj/policy/match.o: policy/match.c include/kvtier/policy.h \
 include/kvtier/trace_format.h
include/kvtier/policy.h:
include/kvtier/trace_format.h:
