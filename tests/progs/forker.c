// SPDX-License-Identifier: MIT
/* Test program: maps memory, forks a child that maps more (from a thread;
 * from its main thread in a TSan build),
 * then execs `cat /proc/self/maps` so the test can see whether the exec'd
 * image loaded kvtier (KVTIER_INHERIT). */
#include <pthread.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static void *child_thread(void *arg)
{
	(void)arg;
	void *p = mmap(NULL, 5 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? (void *)1 : NULL;
}

int main(void)
{
	void *p = mmap(NULL, 3 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return 2;
	pid_t pid = fork();
	if (pid == 0) {
#if defined(__SANITIZE_THREAD__)
		/* TSan cannot make a thread in the child of a process that had
		 * threads (kvtier's trace flush thread): "dup thread with used
		 * id", exit 66. The map is made from the child's own thread. */
		child_thread(NULL);
#else
		pthread_t t;
		void *ret;
		pthread_create(&t, NULL, child_thread, NULL);
		pthread_join(t, &ret);
#endif
		printf("child %d done\n", (int)getpid());
		fflush(stdout);
		execl("/bin/cat", "cat", "/proc/self/maps", (char *)NULL);
		_exit(9);
	}
	int st;
	waitpid(pid, &st, 0);
	printf("parent %d child %d status %d\n", (int)getpid(), (int)pid, WEXITSTATUS(st));
	return WEXITSTATUS(st);
}
