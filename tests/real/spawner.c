// SPDX-License-Identifier: MIT
/* kvtier real-program check: process creation in every form.
 *   spawner            maps 8 MiB; forks a child that starts 4 threads
 *                      (each maps/unmaps 2 MiB 100 times and checksums what
 *                      it wrote), joins them and execs `spawner leaf`; then
 *                      posix_spawn()s `spawner leaf` and posix_spawnp()s
 *                      `true`; waits for all; exit 0 when all succeeded.
 *   spawner leaf       maps 3 MiB, writes it, prints a checksum, exits 0.
 * Prints deterministic lines only (no pids, no addresses). */
#include <pthread.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static uint64_t fill_sum(unsigned char *p, size_t n, unsigned seed)
{
	uint64_t s = 0;
	for (size_t i = 0; i < n; i += 64) {
		p[i] = (unsigned char)(i * 31 + seed);
		s += p[i];
	}
	return s;
}

static void *map(size_t n)
{
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

static int leaf(void)
{
	unsigned char *p = map(3 << 20);
	if (!p)
		return 2;
	printf("leaf sum=%llu\n", (unsigned long long)fill_sum(p, 3 << 20, 7));
	munmap(p, 3 << 20);
	return 0;
}

static void *worker(void *arg)
{
	unsigned id = (unsigned)(uintptr_t)arg;
	uint64_t s = 0;
	for (int i = 0; i < 100; i++) {
		unsigned char *p = map(2 << 20);
		if (!p)
			return (void *)UINTPTR_MAX;
		s += fill_sum(p, 2 << 20, id + (unsigned)i);
		munmap(p, 2 << 20);
	}
	return (void *)(uintptr_t)s;
}

static int wait_ok(pid_t pid, const char *what)
{
	int st;
	if (waitpid(pid, &st, 0) != pid) {
		printf("%s: waitpid failed\n", what);
		return 1;
	}
	printf("%s: exit %d\n", what, WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
	fflush(stdout);
	return !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "leaf"))
		return leaf();
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n <= 0)
		return 3;
	self[n] = 0;
	unsigned char *p = map(8 << 20);
	if (!p)
		return 2;
	printf("parent sum=%llu\n", (unsigned long long)fill_sum(p, 8 << 20, 1));
	fflush(stdout);

	int bad = 0;
	pid_t pid = fork();
	if (pid < 0)
		return 4;
	if (pid == 0) {
		pthread_t t[4];
		uint64_t total = 0;
		for (unsigned i = 0; i < 4; i++)
			if (pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i))
				_exit(5);
		for (unsigned i = 0; i < 4; i++) {
			void *r;
			pthread_join(t[i], &r);
			if ((uintptr_t)r == UINTPTR_MAX)
				_exit(6);
			total += (uintptr_t)r;
		}
		/* The parent's map is still here, copy-on-write. */
		printf("child threads sum=%llu inherited sum=%llu\n", (unsigned long long)total,
		       (unsigned long long)fill_sum(p, 8 << 20, 1));
		fflush(stdout);
		execl(self, "spawner", "leaf", (char *)NULL);
		_exit(9);
	}
	bad |= wait_ok(pid, "fork+threads+exec child");

	char *leaf_argv[] = { "spawner", "leaf", NULL };
	pid_t sp;
	int rc = posix_spawn(&sp, self, NULL, NULL, leaf_argv, environ);
	/* the child prints while this process would: wait first, so the order
	 * of lines on the shared pipe never depends on scheduling */
	if (rc == 0)
		bad |= wait_ok(sp, "posix_spawn child");
	else
		bad = 1;
	printf("posix_spawn rc=%d\n", rc);
	fflush(stdout);

	char *true_argv[] = { "true", NULL };
	rc = posix_spawnp(&sp, "true", NULL, NULL, true_argv, environ);
	printf("posix_spawnp rc=%d\n", rc);
	if (rc == 0)
		bad |= wait_ok(sp, "posix_spawnp true");
	else
		bad = 1;
	munmap(p, 8 << 20);
	printf("spawner %s\n", bad ? "FAILED" : "ok");
	return bad;
}
