/* SPDX-License-Identifier: MIT */
/* Shared helpers for the CUnit suites: a main() that runs the suites and
 * exits non-zero on failure, and a child-process runner that captures
 * stdout/stderr with extra environment variables (for LD_PRELOAD tests).
 * Test-only code: header-only so each suite stays one file. */
#ifndef KVT_TEST_H
#define KVT_TEST_H

#include <CUnit/Basic.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* Build directory the suites run against (make test sets BUILD). */
static inline const char *kvt_build_dir(void)
{
	const char *b = getenv("BUILD");
	return (b && *b) ? b : "build";
}

/* Path under the build directory, into a static rotating buffer. */
static inline const char *kvt_path(const char *rel)
{
	static char bufs[8][512];
	static int next;
	char *b = bufs[next++ & 7];
	snprintf(b, sizeof bufs[0], "%s/%s", kvt_build_dir(), rel);
	return b;
}

/* For preload tests: absolute paths of the built library and the CUDA
 * stand-ins, and the "LD_PRELOAD=..." / "LD_LIBRARY_PATH=..." strings for
 * a child's environment. 0, or 1 when they are not built. */
static inline int kvt_preload_env(char lib[512], char fakedir[512], char ldpath[600],
				  char preload[600])
{
	if (!realpath(kvt_path("libkvtier.so"), lib) || !realpath(kvt_path("fakecuda"), fakedir))
		return 1;
	snprintf(ldpath, 600, "LD_LIBRARY_PATH=%s", fakedir);
	snprintf(preload, 600, "LD_PRELOAD=%s", lib);
	return 0;
}

struct kvt_child {
	int status;       /* raw wait status */
	int exit_code;    /* WEXITSTATUS, or 128+signal */
	char out[65536];
	char err[65536];
	size_t out_len, err_len;
};

/* Run argv with the current environment plus env_extra ("K=V", NULL-ended;
 * "K=" with nothing after removes K). Captures up to 64 KiB of each stream. */
static inline int kvt_run_bounded(struct kvt_child *c, const char *const argv[],
				  const char *const env_extra[], unsigned secs);

static inline int kvt_run(struct kvt_child *c, const char *const argv[],
			  const char *const env_extra[])
{
	return kvt_run_bounded(c, argv, env_extra, 0);
}

/* kvt_run with a time limit (0 = none): the child arms alarm(secs) before
 * execv (the timer survives exec; SIGALRM's default action kills it). */
static inline int kvt_run_bounded(struct kvt_child *c, const char *const argv[],
				  const char *const env_extra[], unsigned secs)
{
	int po[2], pe[2];
	memset(c, 0, sizeof *c);
	if (pipe(po) || pipe(pe))
		return -errno;
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		dup2(po[1], 1);
		dup2(pe[1], 2);
		close(po[0]); close(pe[0]); close(po[1]); close(pe[1]);
		for (int i = 0; env_extra && env_extra[i]; i++) {
			char kv[4096];
			snprintf(kv, sizeof kv, "%s", env_extra[i]);
			char *eq = strchr(kv, '=');
			if (!eq)
				continue;
			*eq = 0;
			if (eq[1])
				setenv(kv, eq + 1, 1);
			else
				unsetenv(kv);
		}
		if (secs) {
			signal(SIGALRM, SIG_DFL);
			alarm(secs);
		}
		execv(argv[0], (char *const *)argv);
		fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(po[1]); close(pe[1]);
	struct pollfd fds[2] = { { po[0], POLLIN, 0 }, { pe[0], POLLIN, 0 } };
	int open_fds = 2;
	while (open_fds > 0) {
		if (poll(fds, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		for (int i = 0; i < 2; i++) {
			if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			char *buf = i ? c->err : c->out;
			size_t *len = i ? &c->err_len : &c->out_len;
			char tmp[4096];
			ssize_t n = read(fds[i].fd, tmp, sizeof tmp);
			if (n <= 0) {
				close(fds[i].fd);
				fds[i].fd = -1;
				open_fds--;
				continue;
			}
			size_t room = sizeof c->out - 1 - *len;
			size_t k = (size_t)n < room ? (size_t)n : room;
			memcpy(buf + *len, tmp, k);
			*len += k;
			buf[*len] = 0;
		}
	}
	waitpid(pid, &c->status, 0);
	c->exit_code = WIFEXITED(c->status) ? WEXITSTATUS(c->status)
					    : 128 + WTERMSIG(c->status);
	return 0;
}

/* Read a whole file into a malloc'd buffer; *len gets its size. */
static inline char *kvt_slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	size_t cap = 1 << 16, n = 0;
	char *b = malloc(cap + 1);
	size_t r;
	while (b && (r = fread(b + n, 1, cap - n, f)) > 0) {
		n += r;
		if (n == cap) {
			char *nb = realloc(b, cap * 2 + 1);
			if (!nb) { free(b); b = NULL; break; }
			b = nb;
			cap *= 2;
		}
	}
	fclose(f);
	if (b) {
		b[n] = 0;
		if (len)
			*len = n;
	}
	return b;
}

/* Whether the line at l is one of the library's log lines: "kvtier[PID]: "
 * (base/log.c; the kvtier command's own messages are "kvtier CMD: ..."). */
static inline int kvt_is_log_line(const char *l)
{
	if (strncmp(l, "kvtier[", 7))
		return 0;
	l += 7;
	if (*l < '0' || *l > '9')
		return 0;
	while (*l >= '0' && *l <= '9')
		l++;
	return !strncmp(l, "]: ", 3);
}

/* The first number of "key=N ..." in INFO text gathered as "\nkey=...\n"
 * lines (each trace INFO record on its own line after a newline), or
 * `missing` when the key is absent. */
static inline unsigned long long kvt_info_u64(const char *infos, const char *key,
					      unsigned long long missing)
{
	char k[96];
	snprintf(k, sizeof k, "\n%s=", key);
	const char *p = strstr(infos, k);
	return p ? strtoull(p + strlen(k), NULL, 10) : missing;
}

/* Whether this is a sanitizer build of the given kind ("thread",
 * "address"): SAN is -fsanitize's list, from make. */
static inline int kvt_san_has(const char *what)
{
	const char *san = getenv("SAN");
	return san && strstr(san, what);
}

/* Take the tests whose names are in skip (NULL-ended) out of a
 * CU_TEST_INFO_NULL-ended list before it is registered, saying so once
 * each: a test left out is not counted as passed. */
static inline void kvt_test_leave_out(CU_TestInfo *tests, const char *const *skip, const char *why)
{
	for (const char *const *k = skip; *k; k++) {
		const CU_TestInfo *t = tests;
		while (t->pName && strcmp(*k, t->pName))
			t++;
		if (!t->pName) {                  /* a renamed test: say so, fail */
			fprintf(stderr, "kvt_test_leave_out: no test named '%s'\n", *k);
			exit(1);
		}
	}
	CU_TestInfo *w = tests;
	for (CU_TestInfo *t = tests; t->pName; t++) {
		int drop = 0;
		for (const char *const *k = skip; *k && !drop; k++)
			drop = !strcmp(*k, t->pName);
		if (drop)
			printf("  not run (%s): %s\n", why, t->pName);
		else
			*w++ = *t;
	}
	*w = (CU_TestInfo)CU_TEST_INFO_NULL;
}

/* Register suites and run them; the exit status is the number of failures
 * (capped), so tests/run_tests.sh can also trust the process status.
 * skip: the name of a test of the first suite to register inactive (a tool
 * it needs is missing: tests/run_tests.sh counts a skip), said in one line
 * "SKIP: skip: why"; NULL: none. */
static inline int kvt_test_main_skip(CU_SuiteInfo *suites, const char *skip, const char *why)
{
	/* KVT_TEST_ONLY=TEXT: only the tests whose names hold TEXT (a
	 * developer's shortcut; the suites and CI never set it) */
	const char *only = getenv("KVT_TEST_ONLY");
	for (CU_SuiteInfo *s = suites; only && *only && s->pName; s++) {
		CU_TestInfo *w = s->pTests;
		for (CU_TestInfo *t = s->pTests; t->pName; t++)
			if (strstr(t->pName, only))
				*w++ = *t;
		*w = (CU_TestInfo)CU_TEST_INFO_NULL;
	}
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	if (CU_register_suites(suites) != CUE_SUCCESS) {
		fprintf(stderr, "CU_register_suites: %s\n", CU_get_error_msg());
		return 1;
	}
	CU_pTest t = skip ? CU_get_test(CU_get_suite(suites[0].pName), skip) : NULL;
	if (t) {
		fprintf(stderr, "SKIP: %s: %s\n", skip, why);
		CU_set_test_active(t, CU_FALSE);
		CU_set_fail_on_inactive(CU_FALSE);
	}
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned fails = CU_get_number_of_tests_failed();
	unsigned afails = CU_get_number_of_failures();
	CU_cleanup_registry();
	return (fails || afails) ? 1 : 0;
}

static inline int kvt_test_main(CU_SuiteInfo *suites)
{
	return kvt_test_main_skip(suites, NULL, NULL);
}

#endif
