// SPDX-License-Identifier: MIT
/* Test program: a server that allocates steadily until it is killed
 * (tests/unit/test_trace_survive.c). Every PERIOD_MS it maps and unmaps
 * 2 MiB (two trace events under kvtier), then writes "n=N t=NS" to stdout:
 * N rounds done, at CLOCK_MONOTONIC NS; every event of those rounds
 * happened before that line. Stops after SECONDS. With "fork", a child
 * does the rounds (its first line: "child=PID t=NS") and the parent waits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static unsigned long long mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

static void say(const char *fmt, unsigned long long a, unsigned long long b)
{
	char line[96];
	int n = snprintf(line, sizeof line, fmt, a, b);
	if (write(1, line, (size_t)n) != n)
		_exit(3);
}

static int rounds(unsigned secs, unsigned period_ms)
{
	unsigned long long end = mono_ns() + secs * 1000000000ull;
	struct timespec nap = { (time_t)(period_ms / 1000), (long)(period_ms % 1000) * 1000000L };
	for (unsigned long long n = 1; mono_ns() < end; n++) {
		void *p = mmap(NULL, 2u << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			       -1, 0);
		if (p == MAP_FAILED || munmap(p, 2u << 20))
			return 1;
		say("n=%llu t=%llu\n", n, mono_ns());
		nanosleep(&nap, NULL);
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: trace_steady SECONDS PERIOD_MS [fork]\n");
		return 2;
	}
	unsigned secs = (unsigned)atoi(argv[1]), period_ms = (unsigned)atoi(argv[2]);
	if (argc < 4 || strcmp(argv[3], "fork"))
		return rounds(secs, period_ms);
	pid_t pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		say("child=%llu t=%llu\n", (unsigned long long)getpid(), mono_ns());
		_exit(rounds(secs, period_ms));
	}
	int st = 0;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
