build/obj/policy/budget.o: policy/budget.c include/kvtier/policy.h \
 include/kvtier/trace_format.h
include/kvtier/policy.h:
include/kvtier/trace_format.h:
