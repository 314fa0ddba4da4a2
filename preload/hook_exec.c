// SPDX-License-Identifier: MIT
/* exec and _exit: the image ends without running destructors, so the
 * trace buffer is written out first (the file then ends without an END
 * record, which readers report as "exec'd or killed") and the live stats
 * segment is removed. The call itself is passed through unchanged. The variadic execl* forms are rebuilt into an
 * argument vector (at most 4096 arguments, else E2BIG) for the v-forms. */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <unistd.h>

#include "../base/kvt.h"
#include "../place/stats.h"
#include "guard.h"
#include "../profiler/trace.h"

static void before_exec(void)
{
	if (kvt_tls.depth == 0 && kvt_ready()) {
		kvt_trace_flush();
		kvt_stats_before_exec();     /* the new image (same pid) makes its own */
	}
}

/* Still here: the exec failed; errno is kept for the caller. */
static int after_exec(int r)
{
	int saved = errno;
	if (kvt_tls.depth == 0 && !kvt_inert())
		kvt_stats_exec_failed();
	errno = saved;
	return r;
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
	return after_exec(real args);                                          \
}

EXEC_HOOK(execve, (const char *path, char *const argv[], char *const envp[]), (path, argv, envp))
EXEC_HOOK(execv, (const char *path, char *const argv[]), (path, argv))
EXEC_HOOK(execvp, (const char *file, char *const argv[]), (file, argv))
EXEC_HOOK(execvpe, (const char *file, char *const argv[], char *const envp[]), (file, argv, envp))

/* ---- _exit, _Exit (dash, os._exit, fork children): async-signal-safe
 * work only (an unlink when this process owns a segment) ---- */

KVT_EXPORT void _exit(int status)
{
	static void (*real)(int);
	if (!real)
		real = (void (*)(int))kvt_real_dlsym(RTLD_NEXT, "_exit");
	if (!kvt_inert())
		kvt_stats_at_exit();
	/* destructors do not run: write out the trace (its END record), after
	 * a bounded wait for its lock (_exit may come from a signal handler
	 * that interrupted this thread's own write); from the application's
	 * SIGTERM handler that kvtier's chained to, even when the signal
	 * landed inside one of kvtier's hooks (it flushed the events already;
	 * a TSan build under load lost the END record there) */
	if ((kvt_tls.depth == 0 || kvt_trace_in_signal_chain()) && kvt_ready())
		kvt_trace_close_if_owner();
	if (real)
		real(status);
	kvt_sys_exit_group(status);
}

KVT_EXPORT void _Exit(int status)
{
	_exit(status);
}

/* ---- execl, execlp, execle: collect the list, call the vector form ---- */

#define MAX_ARGS 4096

static int collect(const char *arg0, va_list ap, char **argv)
{
	int n = 0;
	const char *a = arg0;
	while (a) {
		if (n == MAX_ARGS - 1)
			return -1;
		argv[n++] = (char *)a;
		a = va_arg(ap, const char *);
	}
	argv[n] = NULL;
	return n;
}

static int too_many(void)
{
	errno = E2BIG;
	return -1;
}

KVT_EXPORT int execl(const char *path, const char *arg0, ...)
{
	char *argv[MAX_ARGS];
	va_list ap;
	va_start(ap, arg0);
	int n = collect(arg0, ap, argv);
	va_end(ap);
	return n < 0 ? too_many() : execv(path, argv);
}

KVT_EXPORT int execlp(const char *file, const char *arg0, ...)
{
	char *argv[MAX_ARGS];
	va_list ap;
	va_start(ap, arg0);
	int n = collect(arg0, ap, argv);
	va_end(ap);
	return n < 0 ? too_many() : execvp(file, argv);
}

KVT_EXPORT int execle(const char *path, const char *arg0, ...)
{
	char *argv[MAX_ARGS];
	va_list ap;
	va_start(ap, arg0);
	int n = collect(arg0, ap, argv);
	char *const *envp = n < 0 ? NULL : va_arg(ap, char *const *);
	va_end(ap);
	return n < 0 ? too_many() : execve(path, argv, envp);
}
