// SPDX-License-Identifier: MIT
/* Test program: anonymous maps made, partly unmapped, grown with mremap, and
 * a file-backed map (never recorded). Leaves exactly 3 MiB mapped. Each
 * step checks the kernel's answer; errno must survive the hooks. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MiB (1ul << 20)

int main(void)
{
	char *a = mmap(NULL, 8 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (a == MAP_FAILED)
		return 2;
	memset(a, 1, 8 * MiB);
	if (munmap(a + 2 * MiB, 2 * MiB))      /* [a,2M) and [a+4M,8M) remain */
		return 3;
	if (munmap(a + 4 * MiB, 4 * MiB))      /* [a,2M) remains */
		return 4;
	char *b = mremap(a, 2 * MiB, 3 * MiB, MREMAP_MAYMOVE);
	if (b == MAP_FAILED || b[0] != 1)
		return 5;
	int fd = open("/proc/self/exe", O_RDONLY);
	void *f = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
	if (f == MAP_FAILED)
		return 6;
	munmap(f, 4096);
	close(fd);
	errno = 0;
	void *bad = mmap(NULL, 0, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	printf("zero-length mmap: %s errno=%d\n", bad == MAP_FAILED ? "failed" : "ok", errno);
	printf("left mapped: %lu bytes at %p\n", 3 * MiB, (void *)b);
	return bad == MAP_FAILED && errno == EINVAL ? 0 : 7;
}
