// SPDX-License-Identifier: MIT
/* SIGTERM and SIGINT flush the trace before the process goes (contract in
 * trace.h): the one place kvtier sets a signal disposition. The handler
 * chains to the disposition it found and never replaces the application's
 * silently. Runs in a signal handler: async-signal-safe calls only. */
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <string.h>

#include "../base/kvt.h"
#include "trace.h"

static const int caught[] = { SIGTERM, SIGINT };
#define NR_CAUGHT (sizeof caught / sizeof caught[0])

/* What each signal did before kvtier's handler: called after the flush. */
static struct sigaction before[NR_CAUGHT];
static KVT_TLS int chaining;            /* this thread runs the handler chained to */

int kvt_trace_in_signal_chain(void)
{
	return chaining;
}

static int slot_of(int sig)
{
	for (unsigned i = 0; i < NR_CAUGHT; i++)
		if (caught[i] == sig)
			return (int)i;
	return -1;
}

static int is_default(const struct sigaction *sa)
{
	return !(sa->sa_flags & SA_SIGINFO) && sa->sa_handler == SIG_DFL;
}

static void on_signal(int sig, siginfo_t *si, void *uc)
{
	int saved = errno, i = slot_of(sig);
	if (i < 0)
		return;
	const struct sigaction *b = &before[i];
	int dies = is_default(b);
	kvt_trace_on_signal(sig, dies);
	errno = saved;
	if (dies) {
		/* the default action, as if kvtier had not been here: the signal
		 * is blocked in its handler, so it lands when this returns */
		struct sigaction dfl;
		memset(&dfl, 0, sizeof dfl);
		dfl.sa_handler = SIG_DFL;
		sigemptyset(&dfl.sa_mask);
		sigaction(sig, &dfl, NULL);
		raise(sig);
	} else {
		chaining++;
		if (b->sa_flags & SA_SIGINFO)
			b->sa_sigaction(sig, si, uc);
		else
			b->sa_handler(sig);
		chaining--;
	}
}

/* CPython installs its KeyboardInterrupt handler only where SIGINT is
 * SIG_DFL at its start: a handler of kvtier's there would leave Ctrl-C
 * killing the program instead of raising. A Python program exits through
 * that exception, and its exit writes the trace. */
static int python_wants(int sig)
{
	return sig == SIGINT && kvt_real_dlsym(RTLD_DEFAULT, "Py_IsInitialized");
}

void kvt_trace_signals_install(void)
{
	for (unsigned i = 0; i < NR_CAUGHT; i++) {
		struct sigaction cur, sa;
		if (sigaction(caught[i], NULL, &cur) || python_wants(caught[i]))
			continue;
		if (!(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_IGN)
			continue;                /* ignored stays ignored */
		before[i] = cur;
		memset(&sa, 0, sizeof sa);
		sa.sa_sigaction = on_signal;
		sa.sa_mask = cur.sa_mask;
		sa.sa_flags = (is_default(&cur) ? SA_RESTART | SA_ONSTACK : cur.sa_flags) | SA_SIGINFO;
		if (sigaction(caught[i], &sa, NULL))
			kvt_debug("trace: cannot catch signal %d (%s)", caught[i], strerror(errno));
	}
}
