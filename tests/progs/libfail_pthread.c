// SPDX-License-Identifier: MIT
/* Test double, preloaded before libkvtier (tests/unit/test_migrate_faults.c):
 * pthread_create called from libkvtier.so (its migration thread) fails with
 * EAGAIN, as it does under RLIMIT_NPROC or a full thread table; the
 * application's own calls pass through. At exit it says on stderr how many
 * calls it failed ("libfail_pthread: failed N"), so the test knows the fault
 * really happened. Uninstrumented (the lib* rule), like a third-party preload. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

static int failed;

static int from_kvtier(const void *caller)
{
	Dl_info di;
	return dladdr(caller, &di) && di.dli_fname && strstr(di.dli_fname, "libkvtier");
}

int pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg)
{
	static create_fn real;
	if (from_kvtier(__builtin_return_address(0))) {
		__atomic_fetch_add(&failed, 1, __ATOMIC_RELAXED);
		return EAGAIN;
	}
	if (!real)
		real = (create_fn)dlsym(RTLD_NEXT, "pthread_create");
	return real ? real(t, a, fn, arg) : ENOSYS;
}

__attribute__((destructor)) static void say_failed(void)
{
	char b[64];
	int n = snprintf(b, sizeof b, "libfail_pthread: failed %d\n",
			 __atomic_load_n(&failed, __ATOMIC_RELAXED));
	if (write(STDERR_FILENO, b, (size_t)n) < 0)
		return;
}
