// SPDX-License-Identifier: MIT
/* `make bench` trace-writer loop: appends N alloc/free events through the
 * trace writer (profiler/trace.c, linked from libkvtier.a) to a real file,
 * timed from the first event to the closed file, and prints events/s.
 * With MODE (none or zstd) the flush thread runs (every 1000 ms, the
 * default) and writes records or zstd frames, its CPU time counted in the
 * process's, and the file's size is printed. Writes only the file named on
 * the command line (it must not exist). */
#include <string.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../profiler/trace.h"

static double clock_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	if (argc != 3 && argc != 4) {
		fprintf(stderr, "usage: trace_write FILE EVENTS [none|zstd]\n");
		return 2;
	}
	unsigned long n = strtoul(argv[2], NULL, 0);
	const char *mode = argc == 4 ? argv[3] : NULL;
	if (mode && kvt_trace_compress(!strcmp(mode, "zstd"), NULL))
		return 1;
	int r = kvt_trace_open(argv[1], 1ul << 20, 0);   /* KVTIER_TRACE_BUFFER default */
	if (r) {
		fprintf(stderr, "trace_write: cannot open %s (%d)\n", argv[1], r);
		return 1;
	}
	if (mode)
		kvt_trace_flush_start(1000);
	double w0 = clock_ns(CLOCK_MONOTONIC), c0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
	for (unsigned long i = 0; i < n; i++) {
		struct kvt_rec_event ev = {
			.op = (i & 1) ? KVT_OP_FREE : KVT_OP_ALLOC,
			.kind = KVT_KIND_DEVICE,
			.addr = 0x7f0000000000ull + ((i >> 1) << 12),
			.size = 4096u << (i % 4),
		};
		kvt_trace_event(&ev);
	}
	kvt_trace_close();
	double wall = clock_ns(CLOCK_MONOTONIC) - w0;
	double cpu = clock_ns(CLOCK_PROCESS_CPUTIME_ID) - c0;
	struct kvt_trace_stats st;
	kvt_trace_stats(&st);
	if (st.nr_events < n || st.nr_dropped || st.nr_write_errors) {
		fprintf(stderr, "trace_write: %llu of %lu events written, %llu dropped\n",
			(unsigned long long)st.nr_events, n, (unsigned long long)st.nr_dropped);
		return 1;
	}
	printf("events=%lu wall_events_per_s=%.0f cpu_events_per_s=%.0f",
	       n, n / wall * 1e9, n / cpu * 1e9);
	struct stat fs;
	if (mode && !stat(argv[1], &fs))
		printf(" mode=%s file_bytes=%lld", mode, (long long)fs.st_size);
	printf("\n");
	return 0;
}
