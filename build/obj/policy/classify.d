build/obj/policy/classify.o: policy/classify.c include/kvtier/policy.h \
 include/kvtier/trace_format.h
include/kvtier/policy.h:
include/kvtier/trace_format.h:
