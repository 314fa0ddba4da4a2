/* SPDX-License-Identifier: MIT */
/* What the preload test programs that read hot chunks share (sample_hot,
 * multi_dev, graph_hot): the driver's resolver, found as libcudart finds it
 * (dlopen, then cuGetProcAddress_v2, so kvtier's resolver hooks see every
 * entry point they fetch), a millisecond clock, and the migration thread's
 * epoch count from kvtier's live counters (so a program can run for a
 * number of epochs, not of milliseconds: a loaded machine runs fewer). */
#ifndef KVT_HOT_PROG_H
#define KVT_HOT_PROG_H

#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>

#include "kvtier/stats_format.h"

typedef CUresult (*gpa_t)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

/* The driver's cuGetProcAddress_v2 (NULL without a driver); *h the
 * driver's handle, for its test-only fakecuda_* exports. */
static inline gpa_t hot_prog_gpa(void **h)
{
	*h = dlopen("libcuda.so.1", RTLD_NOW);
	return *h ? (gpa_t)dlsym(*h, "cuGetProcAddress_v2") : NULL;
}

static inline uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* kvtier's live counters (/dev/shm/kvtier.PID, published after each
 * migration epoch): 0 when read, -1 when there is no segment (yet). */
static inline int hot_prog_counters(struct kvt_stats_seg *seg)
{
	char path[64];
	snprintf(path, sizeof path, "%s/%s%d", KVT_STATS_DIR, KVT_STATS_PREFIX, (int)getpid());
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = pread(fd, seg, sizeof *seg, 0);
	close(fd);
	return n == (ssize_t)sizeof *seg ? 0 : -1;
}

/* Epochs the migration thread has finished; -1 without counters. */
static inline int64_t hot_prog_epochs(void)
{
	struct kvt_stats_seg seg;
	return hot_prog_counters(&seg) ? -1 : (int64_t)seg.epochs;
}

/* Chunks the migration thread has promoted; -1 without counters. */
static inline int64_t hot_prog_promoted(void)
{
	struct kvt_stats_seg seg;
	return hot_prog_counters(&seg) ? -1 : (int64_t)seg.nr_promoted;
}

#endif
