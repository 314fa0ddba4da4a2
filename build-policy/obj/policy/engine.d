build-policy/obj/policy/engine.o: policy/engine.c include/kvtier/policy.h \
 include/kvtier/trace_format.h
include/kvtier/policy.h:
include/kvtier/trace_format.h:
