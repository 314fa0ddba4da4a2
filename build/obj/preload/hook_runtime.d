build/obj/preload/hook_runtime.o: preload/hook_runtime.c \
 /usr/local/cuda/include/cuda_runtime_api.h \
 /usr/local/cuda/include/crt/host_defines.h \
 /usr/local/cuda/include/builtin_types.h \
 /usr/local/cuda/include/device_types.h \
 /usr/local/cuda/include/driver_types.h \
 /usr/local/cuda/include/vector_types.h \
 /usr/local/cuda/include/surface_types.h \
 /usr/local/cuda/include/texture_types.h \
 /usr/local/cuda/include/cuda_device_runtime_api.h preload/kvt.h \
 include/kvtier/trace_format.h preload/hooks.h preload/record.h \
 include/kvtier/api.h preload/../profiler/registry.h
/usr/local/cuda/include/cuda_runtime_api.h:
/usr/local/cuda/include/crt/host_defines.h:
/usr/local/cuda/include/builtin_types.h:
/usr/local/cuda/include/device_types.h:
/usr/local/cuda/include/driver_types.h:
/usr/local/cuda/include/vector_types.h:
/usr/local/cuda/include/surface_types.h:
/usr/local/cuda/include/texture_types.h:
/usr/local/cuda/include/cuda_device_runtime_api.h:
preload/kvt.h:
include/kvtier/trace_format.h:
preload/hooks.h:
preload/record.h:
include/kvtier/api.h:
preload/../profiler/registry.h:
