// SPDX-License-Identifier: MIT
/* exec: the new image replaces this one without running destructors, so
 * the trace buffer is written out first (the file then ends without an END
 * record, which readers report as "exec'd or killed"). The call itself is
 * passed through unchanged. execl* variants reach execve inside glibc
 * without the PLT and are not seen. */
#include <dlfcn.h>
#include <errno.h>
#include <unistd.h>

#include "kvt.h"
#include "../profiler/trace.h"

static void before_exec(void)
{
	if (kvt_tls.depth == 0 && kvt_ready())
		kvt_trace_flush();
}

#define EXEC_HOOK(name, params, args)                                          \
KVT_EXPORT int name params                                                     \
{                                                                              \
	static int (*real) params;                                             \
	if (!real)                                                             \
		real = (int (*) params)kvt_real_dlsym(RTLD_NEXT, #name);       \
	if (!real) {                                                           \
		errno = ENOSYS;                                                \
		return -1;                                                     \
	}                                                                      \
	before_exec();                                                         \
	return real args;                                                      \
}

EXEC_HOOK(execve, (const char *path, char *const argv[], char *const envp[]), (path, argv, envp))
EXEC_HOOK(execv, (const char *path, char *const argv[]), (path, argv))
EXEC_HOOK(execvp, (const char *file, char *const argv[]), (file, argv))
EXEC_HOOK(execvpe, (const char *file, char *const argv[], char *const envp[]), (file, argv, envp))
