// SPDX-License-Identifier: MIT
/* Test double, preloaded after libkvtier (tests/unit/test_trace_survive.c):
 * its constructor runs before kvtier's and installs a SIGTERM handler, as a
 * runtime that sets up its signals before kvtier starts would. The handler
 * says "libsigterm_first: handler" on stderr and ends the process with
 * _exit(42). Uninstrumented (the lib* rule). */
#include <signal.h>
#include <string.h>
#include <unistd.h>

static void on_term(int sig)
{
	static const char msg[] = "libsigterm_first: handler\n";
	(void)sig;
	if (write(2, msg, sizeof msg - 1) < 0)
		_exit(43);
	_exit(42);
}

__attribute__((constructor)) static void install(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_term;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
}
