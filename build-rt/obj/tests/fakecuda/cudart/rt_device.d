build-rt/obj/tests/fakecuda/cudart/rt_device.o: \
 tests/fakecuda/cudart/rt_device.c tests/fakecuda/cudart/rt_internal.h \
 /usr/local/cuda/include/cuda.h /usr/local/cuda/include/cudaTypedefs.h \
 /usr/local/cuda/include/cuda_runtime_api.h \
 /usr/local/cuda/include/crt/host_defines.h \
 /usr/local/cuda/include/builtin_types.h \
 /usr/local/cuda/include/device_types.h \
 /usr/local/cuda/include/driver_types.h \
 /usr/local/cuda/include/vector_types.h \
 /usr/local/cuda/include/surface_types.h \
 /usr/local/cuda/include/texture_types.h \
 /usr/local/cuda/include/cuda_device_runtime_api.h
tests/fakecuda/cudart/rt_internal.h:
/usr/local/cuda/include/cuda.h:
/usr/local/cuda/include/cudaTypedefs.h:
/usr/local/cuda/include/cuda_runtime_api.h:
/usr/local/cuda/include/crt/host_defines.h:
/usr/local/cuda/include/builtin_types.h:
/usr/local/cuda/include/device_types.h:
/usr/local/cuda/include/driver_types.h:
/usr/local/cuda/include/vector_types.h:
/usr/local/cuda/include/surface_types.h:
/usr/local/cuda/include/texture_types.h:
/usr/local/cuda/include/cuda_device_runtime_api.h:
