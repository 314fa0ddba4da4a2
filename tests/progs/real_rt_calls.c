// SPDX-License-Identifier: MIT
/* rt_calls.c built against the toolkit's real libcudart.so.13. */
#include "rt_calls.c"
