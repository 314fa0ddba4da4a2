// SPDX-License-Identifier: MIT
/* Test library for tests/unit/test_secure.c, planted under the names kvtier
 * dlopen()s at run time (libcupti.so.13, libcxl.so.1) in a directory named
 * by LD_LIBRARY_PATH. Loading it leaves a marker "<its path>.loaded", so
 * the test sees whether any process ran code from the planted path.
 * As libcupti.so.13 it is a CUPTI that refuses service the way a busy or
 * broken one does, after leaving a thread-specific-data destructor on the
 * calling thread (as the real one does): if kvtier unloaded it then, that
 * thread would crash when it exits. */
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#define CUPTI_ERROR_UNKNOWN 999

__attribute__((constructor)) static void planted_loaded(void)
{
	Dl_info di;
	char path[600];
	if (!dladdr((void *)&planted_loaded, &di) || !di.dli_fname)
		return;
	snprintf(path, sizeof path, "%s.loaded", di.dli_fname);
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd >= 0)
		close(fd);
}

static pthread_key_t key;

static void per_thread_cleanup(void *v)
{
	(void)v;
}

/* ---- the activity API kvtier resolves; every call refuses ---- */

int cuptiActivityRegisterCallbacks(void *request, void *complete)
{
	(void)request;
	(void)complete;
	if (!pthread_key_create(&key, per_thread_cleanup))
		pthread_setspecific(key, &key);
	return CUPTI_ERROR_UNKNOWN;
}

int cuptiActivityConfigureUnifiedMemoryCounter(void *config, unsigned n)
{
	(void)config;
	(void)n;
	return CUPTI_ERROR_UNKNOWN;
}

int cuptiActivityEnable(int kind)
{
	(void)kind;
	return CUPTI_ERROR_UNKNOWN;
}

int cuptiActivityDisable(int kind)
{
	(void)kind;
	return CUPTI_ERROR_UNKNOWN;
}

int cuptiActivityFlushAll(unsigned flags)
{
	(void)flags;
	return CUPTI_ERROR_UNKNOWN;
}

int cuptiActivityGetNextRecord(void *buf, size_t valid, void **rec)
{
	(void)buf;
	(void)valid;
	(void)rec;
	return CUPTI_ERROR_UNKNOWN;
}
