build/obj/policy/units.o: policy/units.c include/kvtier/units.h
include/kvtier/units.h:
