// SPDX-License-Identifier: MIT
/* `kvtier stat`: a running workload's live counters read from another
 * process (text, list, Prometheus), checked against what the workload says
 * it allocated; the segment's permissions (0600, a planted symlink never
 * followed, a 0644 segment refused), its removal at exit, KVTIER_STATS=0.
 * Runs $(BUILD)/kvtier and the workloads as child processes. */
#include <dirent.h>
#include <regex.h>
#include <signal.h>
#include <stdint.h>
#include <time.h>

#include "kvt_test.h"
#include "kvt_trace_test.h"
#include "kvtier/stats_format.h"

static struct kvt_child rc;
static char tmpdir[256];

static int suite_init(void)
{
	snprintf(tmpdir, sizeof tmpdir, "/tmp/kvt-stat-XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int suite_clean(void)
{
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
	return system(cmd) ? -1 : 0;
}

static const char *seg_path(int pid)
{
	static char p[128];
	snprintf(p, sizeof p, "%s/%s%d", KVT_STATS_DIR, KVT_STATS_PREFIX, pid);
	return p;
}

/* Under a sanitizer build, /bin/sh (uninstrumented) cannot host the
 * instrumented preload (see test_cli.c). */
static int skip_sh_under_san(void)
{
	const char *san = getenv("SAN");
	if (san && *san) {
		CU_PASS("skipped in sanitizer builds: /bin/sh cannot host a sanitizer-built preload");
		return 1;
	}
	return 0;
}

static void preload_env(void)
{
	char lib[600];
	if (realpath(kvt_path("libkvtier.so"), lib))
		setenv("LD_PRELOAD", lib, 1);
	setenv("LD_LIBRARY_PATH", kvt_path("fakecuda"), 1);
}

/* Fork; the child waits for one byte on a pipe (so the parent can act on
 * its pid first), then execs argv under the preload with stdout and
 * stderr into files. Returns the pid; *go is the pipe to write to. */
static pid_t spawn_waiting(const char *const argv[], const char *out, const char *err,
			   const char *const *extra_env, int *go)
{
	int p[2];
	if (pipe(p))
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		char c;
		close(p[1]);
		if (read(p[0], &c, 1) != 1)
			_exit(126);
		int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int fe = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		dup2(fo, 1);
		dup2(fe, 2);
		preload_env();
		for (int i = 0; extra_env && extra_env[i]; i++)
			putenv((char *)extra_env[i]);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(p[0]);
	*go = p[1];
	return pid;
}

static void go_now(int fd)
{
	ssize_t w = write(fd, "g", 1);
	(void)w;
	close(fd);
}

static uint64_t key_value(const char *text, const char *key)
{
	const char *p = strstr(text, key);
	return p ? strtoull(p + strlen(key), NULL, 10) : 0;
}

/* Value of one Prometheus sample "name{labels} value", labels exact. */
static double prom_sample(const char *text, const char *name_labels)
{
	char want[256];
	snprintf(want, sizeof want, "\n%s ", name_labels);
	const char *p = strstr(text, want);
	return p ? strtod(p + strlen(want), NULL) : -1;
}

/* Every non-comment line is `name{labels} value`; returns the sample count
 * or -1 on the first bad line. */
static int prom_parse(const char *text)
{
	regex_t re;
	int n = 0;
	regcomp(&re, "^[a-zA-Z_:][a-zA-Z0-9_:]*\\{([a-zA-Z_][a-zA-Z0-9_]*=\"[^\"]*\",?)*\\} "
		     "[0-9]+(\\.[0-9]+)?$", REG_EXTENDED | REG_NOSUB);
	char *copy = strdup(text), *save = NULL;
	for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		if (!strncmp(l, "# HELP ", 7) || !strncmp(l, "# TYPE ", 7))
			continue;
		if (regexec(&re, l, 0, NULL, 0)) {
			fprintf(stderr, "\n  not a Prometheus sample: '%s'", l);
			n = -1;
			break;
		}
		n++;
	}
	free(copy);
	regfree(&re);
	return n;
}

/* ---- a live workload read from here ---- */

static void test_live_workload(void)
{
	char out[400], err[400], pidarg[16];
	static char last_prom[65536 + 2], text[65536];
	snprintf(out, sizeof out, "%s/wl.out", tmpdir);
	snprintf(err, sizeof err, "%s/wl.err", tmpdir);
	const char *wl[] = { kvt_path("workloads/vllm-like"), "--mode", "native", "--kv-over-hbm",
			     "2", "--steps", "100", "--quiet", NULL };
	int go;
	/* paced (decode steps of ~20 ms real): the run lasts ~2-3 s of epochs
	 * with every KV range tracked, not ~0.3 s mostly spent allocating */
	const char *pace[] = { "FAKECUDA_PACE=10", NULL };
	pid_t pid = spawn_waiting(wl, out, err, pace, &go);
	CU_ASSERT_FATAL(pid > 0);
	go_now(go);
	snprintf(pidarg, sizeof pidarg, "%d", (int)pid);
	const char *prom[] = { kvt_path("kvtier"), "stat", pidarg, "--prometheus", NULL };
	const char *txt[] = { kvt_path("kvtier"), "stat", pidarg, NULL };
	const char *list[] = { kvt_path("kvtier"), "stat", NULL };
	int st, reads = 0, listed = 0, mode_ok = -1;
	double most_chunks = 0;   /* far + hbm, the most any read saw */
	char cf[96], ch[96];
	snprintf(cf, sizeof cf, "kvtier_chunks{pid=\"%d\",tier=\"far\"}", (int)pid);
	snprintf(ch, sizeof ch, "kvtier_chunks{pid=\"%d\",tier=\"hbm\"}", (int)pid);
	text[0] = last_prom[0] = 0;
	while (waitpid(pid, &st, WNOHANG) == 0) {
		struct stat sb;
		if (mode_ok < 0 && !lstat(seg_path(pid), &sb))
			mode_ok = S_ISREG(sb.st_mode) && (sb.st_mode & 07777) == 0600 &&
				  sb.st_uid == geteuid();
		if (kvt_run(&rc, prom, NULL) == 0 && rc.exit_code == 0) {
			snprintf(last_prom, sizeof last_prom, "\n%s", rc.out);
			reads++;
			double c = prom_sample(last_prom, cf) + prom_sample(last_prom, ch);
			if (c > most_chunks)
				most_chunks = c;
		}
		if (reads > 3 && kvt_run(&rc, txt, NULL) == 0 && rc.exit_code == 0)
			snprintf(text, sizeof text, "%s", rc.out);
		if (!listed && kvt_run(&rc, list, NULL) == 0 && strstr(rc.out, pidarg))
			listed = 1;
		usleep(20000);
	}
	CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	fprintf(stderr, "\n  %d reads while it ran", reads);
	CU_ASSERT_FATAL(reads >= 2);
	CU_ASSERT_EQUAL(mode_ok, 1);
	CU_ASSERT(listed);
	CU_ASSERT_EQUAL(access(seg_path(pid), F_OK), -1);     /* removed at exit */
	CU_ASSERT(prom_parse(last_prom + 1) > 40);
	/* the text view */
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "kvtier stat: pid "));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "vllm-like"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "managed:far"));
	/* plausible: every KV tensor placed (managed:hbm provisional + far) */
	char *wlout = kvt_slurp(out, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(wlout);
	uint64_t nr_kv = key_value(wlout, "kv_allocations="),
		 kv_bytes = key_value(wlout, "kv_allocation_bytes=");
	free(wlout);
	CU_ASSERT(nr_kv >= 2 && kv_bytes > 0);
	char l1[128], l2[128];
	snprintf(l1, sizeof l1, "kvtier_placed_bytes_total{pid=\"%d\",placement=\"managed:hbm\"}", pid);
	snprintf(l2, sizeof l2, "kvtier_placed_bytes_total{pid=\"%d\",placement=\"managed:far\"}", pid);
	double placed = prom_sample(last_prom, l1) + prom_sample(last_prom, l2);
	fprintf(stderr, "; KV %llu x %llu, placed %.0f", (unsigned long long)nr_kv,
		(unsigned long long)kv_bytes, placed);
	CU_ASSERT_EQUAL((uint64_t)placed, nr_kv * kv_bytes);
	char d[128];
	snprintf(d, sizeof d, "kvtier_allocations_total{pid=\"%d\",kind=\"device\"}", pid);
	CU_ASSERT(prom_sample(last_prom, d) > (double)nr_kv);
	snprintf(d, sizeof d, "kvtier_allocated_bytes_total{pid=\"%d\",kind=\"device\"}", pid);
	CU_ASSERT(prom_sample(last_prom, d) >= (double)(nr_kv * kv_bytes));
	snprintf(d, sizeof d, "kvtier_migrate_epochs_total{pid=\"%d\"}", pid);
	CU_ASSERT(prom_sample(last_prom, d) >= 1);
	snprintf(d, sizeof d, "kvtier_chunks{pid=\"%d\",tier=\"far\"}", pid);
	double far = prom_sample(last_prom, d);
	snprintf(d, sizeof d, "kvtier_chunks{pid=\"%d\",tier=\"hbm\"}", pid);
	double hbm = prom_sample(last_prom, d);
	CU_ASSERT(far >= 0 && hbm >= 0);
	fprintf(stderr, "; chunks at most %.0f (last read: far %.0f hbm %.0f)", most_chunks, far, hbm);
	/* 2 MiB chunks covered the KV (each tensor rounded up) while it was
	 * all tracked; the last read may catch the exit's frees (untracked
	 * ranges are not counted), so the most any read saw */
	CU_ASSERT(most_chunks >= (double)(nr_kv * kv_bytes / (2u << 20)));
	CU_ASSERT_PTR_NOT_NULL(strstr(last_prom, "# TYPE kvtier_placed_bytes_total counter\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(last_prom, "# HELP kvtier_live_bytes "));
}

/* ---- per device: the budget in force, HBM bytes, faults, link bytes ---- */

/* The inode of path (0: none): a file replaced by rename gets a new one. */
static ino_t inode_of(const char *path)
{
	struct stat sb;
	return stat(path, &sb) ? 0 : sb.st_ino;
}

/* Files in tmpdir whose name starts with prefix. */
static int count_prefixed(const char *prefix)
{
	DIR *d = opendir(tmpdir);
	struct dirent *e;
	int n = 0;
	while (d && (e = readdir(d)))
		n += !strncmp(e->d_name, prefix, strlen(prefix));
	if (d)
		closedir(d);
	return n;
}

/* A paced vllm-like at 2x read with `stat --prometheus -o FILE` while it
 * runs: every read parses line by line; from the first epoch on, the
 * budget in force is there (per device and in the process's gauge), the
 * same as the trace's migrate.hbm_budget; device 0 has HBM bytes, faults
 * and link bytes; FILE is replaced by rename each time (a new inode) and
 * no temporary file stays; the text view has the device line. */
static void test_live_devices(void)
{
	char out[400], err[400], prom[400], pidarg[16], trace[500];
	static char text[65536];
	snprintf(out, sizeof out, "%s/dev.out", tmpdir);
	snprintf(err, sizeof err, "%s/dev.err", tmpdir);
	snprintf(prom, sizeof prom, "%s/kvtier.prom", tmpdir);
	snprintf(trace, sizeof trace, "KVTIER_TRACE=%s/dev.%%p.trace", tmpdir);
	const char *wl[] = { kvt_path("workloads/vllm-like"), "--mode", "native", "--kv-over-hbm",
			     "2", "--steps", "100", "--quiet", NULL };
	const char *env[] = { "FAKECUDA_PACE=10", trace, NULL };
	int go;
	pid_t pid = spawn_waiting(wl, out, err, env, &go);
	CU_ASSERT_FATAL(pid > 0);
	go_now(go);
	snprintf(pidarg, sizeof pidarg, "%d", (int)pid);
	const char *st_prom[] = { kvt_path("kvtier"), "stat", pidarg, "--prometheus", "-o", prom,
				  NULL };
	const char *st_txt[] = { kvt_path("kvtier"), "stat", pidarg, NULL };
	char k_epochs[96], k_budget[96], k_dbudget[128], k_dhbm[128], k_faults[128], k_link[160];
	char k_fin[128];
	snprintf(k_epochs, sizeof k_epochs, "kvtier_migrate_epochs_total{pid=\"%d\"}", (int)pid);
	snprintf(k_budget, sizeof k_budget, "kvtier_hbm_budget_bytes{pid=\"%d\"}", (int)pid);
	snprintf(k_dbudget, sizeof k_dbudget,
		 "kvtier_device_hbm_budget_bytes{pid=\"%d\",device=\"0\"}", (int)pid);
	snprintf(k_dhbm, sizeof k_dhbm, "kvtier_device_hbm_bytes{pid=\"%d\",device=\"0\"}", (int)pid);
	snprintf(k_faults, sizeof k_faults, "kvtier_device_gpu_faults_total{pid=\"%d\",device=\"0\"}",
		 (int)pid);
	snprintf(k_link, sizeof k_link,
		 "kvtier_device_link_bytes_total{pid=\"%d\",device=\"0\",direction=\"to_hbm\"}",
		 (int)pid);
	snprintf(k_fin, sizeof k_fin, "kvtier_device_fault_in_bytes_total{pid=\"%d\",device=\"0\"}",
		 (int)pid);
	int wst, reads = 0, planned = 0, late = 0, bad_parse = 0, inode_same = 0;
	double most_fin = 0;
	double budget = -1, most_hbm = 0, most_faults = 0, most_link = 0;
	ino_t last_ino = 0;
	text[0] = 0;
	while (waitpid(pid, &wst, WNOHANG) == 0) {
		if (kvt_run(&rc, st_prom, NULL) == 0 && rc.exit_code == 0) {
			char *p = kvt_slurp(prom, NULL);
			ino_t ino = inode_of(prom);
			if (p) {
				static char body[65536 + 2];
				snprintf(body, sizeof body, "\n%s", p);
				reads++;
				inode_same += last_ino && ino == last_ino;
				last_ino = ino;
				if (prom_parse(p) <= 0)
					bad_parse++;
				double ep = prom_sample(body, k_epochs), b = prom_sample(body, k_budget);
				double db = prom_sample(body, k_dbudget), h = prom_sample(body, k_dhbm);
				double fa = prom_sample(body, k_faults), li = prom_sample(body, k_link);
				if (ep >= 1) {
					planned++;
					/* published with the epoch that derived it: never late */
					if (b <= 0 || db <= 0 || db != b)
						late++;
					budget = db;
				}
				if (h > most_hbm)
					most_hbm = h;
				if (fa > most_faults)
					most_faults = fa;
				if (li > most_link)
					most_link = li;
				double fin = prom_sample(body, k_fin);
				if (fin > most_fin)
					most_fin = fin;
				free(p);
			}
		}
		if (planned && !text[0] && kvt_run(&rc, st_txt, NULL) == 0 && rc.exit_code == 0)
			snprintf(text, sizeof text, "%s", rc.out);
		usleep(20000);
	}
	CU_ASSERT(WIFEXITED(wst) && WEXITSTATUS(wst) == 0);
	fprintf(stderr, "\n  %d reads, %d after the first epoch; budget %.0f, HBM at most %.0f, "
		"faults %.0f, link to HBM %.0f", reads, planned, budget, most_hbm, most_faults,
		most_link);
	CU_ASSERT_FATAL(planned >= 2);
	CU_ASSERT_EQUAL(late, 0);
	CU_ASSERT_EQUAL(bad_parse, 0);
	CU_ASSERT_EQUAL(inode_same, 0);              /* each -o write is a rename */
	CU_ASSERT_EQUAL(count_prefixed(".kvtier.prom."), 0);   /* no temporary left */
	CU_ASSERT(most_hbm > 0);
	CU_ASSERT(most_faults > 0);
	CU_ASSERT(most_link > 0);
	/* faults migrate: the driver's own bytes (every managed range, so not
	 * a part of the link bytes, which count the tracked ranges) */
	CU_ASSERT(most_fin > 0);
	/* the budget the trace says the migrator planned against */
	char tpath[600] = "";
	DIR *d = opendir(tmpdir);
	struct dirent *e;
	while (d && (e = readdir(d)))
		if (!strncmp(e->d_name, "dev.", 4) && strstr(e->d_name, ".trace"))
			snprintf(tpath, sizeof tpath, "%s/%s", tmpdir, e->d_name);
	if (d)
		closedir(d);
	static char infos[65536];
	CU_ASSERT_EQUAL_FATAL(kvt_trace_infos(tpath, infos, sizeof infos), 0);
	CU_ASSERT_EQUAL((double)kvt_info_u64(infos, "migrate.hbm_budget", 0), budget);
	/* the text view: the device's line */
	char want[96];
	snprintf(want, sizeof want, "  device 0: HBM budget ");
	CU_ASSERT_PTR_NOT_NULL(strstr(text, want));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, " in force (epoch "));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "; GPU faults "));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "; the driver on its own (any managed memory): "));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, " in on faults, "));
	CU_ASSERT_PTR_NULL(strstr(text, "not yet derived"));
}

/* -o FILE: a directory that cannot be written is an error (status 1, the
 * file untouched); -o without a value is a usage error. */
static void test_output_file_errors(void)
{
	char ro[400], target[500];
	snprintf(ro, sizeof ro, "%s/ro", tmpdir);
	CU_ASSERT_FATAL(mkdir(ro, 0500) == 0);
	snprintf(target, sizeof target, "%s/x.prom", ro);
	const char *argv[] = { kvt_path("kvtier"), "stat", "--prometheus", "-o", target, NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, argv, NULL) == 0);
	if (geteuid() != 0) {               /* root writes anywhere */
		CU_ASSERT_EQUAL(rc.exit_code, 1);
		CU_ASSERT_PTR_NOT_NULL(strstr(rc.err, "cannot create a temporary file"));
		CU_ASSERT_EQUAL(access(target, F_OK), -1);
	}
	chmod(ro, 0700);
	/* a good one: the list of processes, in Prometheus form, mode 0644 less umask */
	snprintf(target, sizeof target, "%s/all.prom", tmpdir);
	const char *ok[] = { kvt_path("kvtier"), "stat", "--prometheus", "-o", target, NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, ok, NULL) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 0);
	CU_ASSERT_EQUAL(rc.out_len, 0);
	char *p = kvt_slurp(target, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT_PTR_NOT_NULL(strstr(p, "# TYPE kvtier_device_hbm_budget_bytes gauge\n"));
	CU_ASSERT(prom_parse(p) >= 0);
	free(p);
	struct stat sb;
	mode_t um = umask(0);
	umask(um);
	CU_ASSERT(!stat(target, &sb) && (sb.st_mode & 0777) == (0644 & ~um));
	const char *none[] = { kvt_path("kvtier"), "stat", "-o", NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, none, NULL) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 2);
}

/* ---- permissions ---- */

static void test_symlink_never_followed(void)
{
	if (skip_sh_under_san())
		return;
	char target[400], out[400], err[400];
	snprintf(target, sizeof target, "%s/target", tmpdir);
	snprintf(out, sizeof out, "%s/sl.out", tmpdir);
	snprintf(err, sizeof err, "%s/sl.err", tmpdir);
	FILE *f = fopen(target, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs("precious\n", f);
	fclose(f);
	chmod(target, 0644);
	const char *sh[] = { "/bin/sh", "-c", "test -L /dev/shm/kvtier.$$ && echo still-a-link", NULL };
	int go;
	pid_t pid = spawn_waiting(sh, out, err, NULL, &go);
	CU_ASSERT_FATAL(pid > 0);
	CU_ASSERT_FATAL(symlink(target, seg_path(pid)) == 0);
	go_now(go);
	int st;
	waitpid(pid, &st, 0);
	CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	char *o = kvt_slurp(out, NULL), *e = kvt_slurp(err, NULL), *t = kvt_slurp(target, NULL);
	struct stat sb, lsb;
	CU_ASSERT_STRING_EQUAL(o ? o : "", "still-a-link\n");
	CU_ASSERT_STRING_EQUAL(t ? t : "", "precious\n");          /* untouched */
	CU_ASSERT(!stat(target, &sb) && (sb.st_mode & 07777) == 0644 && sb.st_size == 9);
	CU_ASSERT(!lstat(seg_path(pid), &lsb) && S_ISLNK(lsb.st_mode));   /* not removed either */
	/* one warning naming the path */
	if (!e || !strstr(e, "already exists"))
		fprintf(stderr, "\n  stderr: %s", e ? e : "(none)");
	char want[64];
	snprintf(want, sizeof want, "kvtier[%d]: stats: /dev/shm/kvtier.", (int)pid);
	CU_ASSERT_PTR_NOT_NULL(e ? strstr(e, want) : NULL);
	CU_ASSERT_PTR_NOT_NULL(e ? strstr(e, "already exists") : NULL);
	/* and the reader refuses the link */
	char pidarg[16];
	snprintf(pidarg, sizeof pidarg, "%d", (int)pid);
	const char *argv[] = { kvt_path("kvtier"), "stat", pidarg, NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, argv, NULL) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.err, "symbolic link; refused"));
	unlink(seg_path(pid));
	free(o);
	free(e);
	free(t);
}

/* A segment file as kvtier writes it, for pid, with the given mode, magic
 * and version (and this pid namespace). */
static void plant_segment(int pid, mode_t mode, uint64_t magic, uint32_t version)
{
	const char *p = seg_path(pid);
	unlink(p);
	int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0600);
	CU_ASSERT_FATAL(fd >= 0);
	struct kvt_stats_seg s;
	struct stat ns;
	memset(&s, 0, sizeof s);
	s.magic = magic;
	s.version = version;
	s.size = sizeof s;
	s.pid = pid;
	s.pidns_ino = stat("/proc/self/ns/pid", &ns) ? 0 : (uint64_t)ns.st_ino;
	char page[4096] = { 0 };
	memcpy(page, &s, sizeof s);
	CU_ASSERT(write(fd, page, sizeof page) == (ssize_t)sizeof page);
	fchmod(fd, mode);
	close(fd);
}

/* A segment someone made readable by others is refused, whatever it holds. */
static void test_mode_0644_refused(void)
{
	int pid = (int)getpid();        /* this test process has no segment of its own */
	const char *p = seg_path(pid);
	plant_segment(pid, 0644, KVT_STATS_MAGIC, KVT_STATS_VERSION);
	char pidarg[16];
	snprintf(pidarg, sizeof pidarg, "%d", pid);
	const char *argv[] = { kvt_path("kvtier"), "stat", pidarg, NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, argv, NULL) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.err, "expected mode 0600"));
	CU_ASSERT_EQUAL(rc.out_len, 0);
	/* the same file at 0600 is read (the check above is the mode, nothing else) */
	chmod(p, 0600);
	CU_ASSERT_FATAL(kvt_run(&rc, argv, NULL) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.out, "kvtier stat: pid "));
	/* a newer version is refused with its version named */
	plant_segment(pid, 0600, KVT_STATS_MAGIC, KVT_STATS_VERSION + 1);
	CU_ASSERT_FATAL(kvt_run(&rc, argv, NULL) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 1);
	char newer[32];
	snprintf(newer, sizeof newer, "segment version %u", KVT_STATS_VERSION + 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.err, newer));
	unlink(p);
	/* gone: a clear message, status 1 */
	CU_ASSERT_FATAL(kvt_run(&rc, argv, NULL) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.err, "no kvtier process"));
}

static pid_t dead_pid(void)
{
	pid_t pid = fork();
	if (pid == 0)
		_exit(0);
	waitpid(pid, NULL, 0);
	return pid;
}

/* A process killed by a signal leaves its segment; the next process under
 * kvtier removes the segments of pids that no longer exist, and only
 * those that are provably kvtier's (the checks of the own-pid case). */
static void test_stale_segments_swept(void)
{
	char lib[512], fakedir[512], ldpath[600], preload[600];
	CU_ASSERT_FATAL(kvt_preload_env(lib, fakedir, ldpath, preload) == 0);
	pid_t gone = dead_pid(), gone_magic = dead_pid(), gone_0644 = dead_pid();
	int alive = (int)getpid();          /* this test process: alive, no segment of its own */
	plant_segment(gone, 0600, KVT_STATS_MAGIC, KVT_STATS_VERSION);
	plant_segment(gone_magic, 0600, KVT_STATS_MAGIC + 1, KVT_STATS_VERSION);
	plant_segment(gone_0644, 0644, KVT_STATS_MAGIC, KVT_STATS_VERSION);
	plant_segment(alive, 0600, KVT_STATS_MAGIC, KVT_STATS_VERSION);
	const char *argv[] = { kvt_path("workloads/vllm-like"), "--help", NULL };
	const char *env[] = { preload, ldpath, "KVTIER_LOG=info", NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, argv, env) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 0);
	struct stat sb;
	CU_ASSERT(stat(seg_path(gone), &sb) != 0 && errno == ENOENT);       /* swept */
	CU_ASSERT(stat(seg_path(gone_magic), &sb) == 0);                    /* not a segment */
	CU_ASSERT(stat(seg_path(gone_0644), &sb) == 0);                     /* not as made */
	CU_ASSERT(stat(seg_path(alive), &sb) == 0);                         /* its pid lives */
	/* (others may have been left by killed processes of earlier suites) */
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.err, "segment(s) of exited processes from /dev/shm"));
	unlink(seg_path(gone_magic));
	unlink(seg_path(gone_0644));
	unlink(seg_path(alive));
}

/* The process sees its own segment; KVTIER_STATS=0 makes none. */
static void test_stats_off(void)
{
	if (skip_sh_under_san())
		return;
	char lib[600], pre[700];
	CU_ASSERT_FATAL(realpath(kvt_path("libkvtier.so"), lib) != NULL);
	snprintf(pre, sizeof pre, "LD_PRELOAD=%s", lib);
	const char *argv[] = { "/bin/sh", "-c",
		"if test -f /dev/shm/kvtier.$$; then stat -c %a /dev/shm/kvtier.$$; else echo none; fi",
		NULL };
	const char *on[] = { pre, NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, argv, on) == 0);
	CU_ASSERT_STRING_EQUAL(rc.out, "600\n");
	CU_ASSERT_EQUAL(rc.err_len, 0);
	const char *off[] = { pre, "KVTIER_STATS=0", NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, argv, off) == 0);
	CU_ASSERT_STRING_EQUAL(rc.out, "none\n");
	CU_ASSERT_EQUAL(rc.err_len, 0);
}

static void test_usage(void)
{
	static const char *const bad[][4] = { { "--bogus" }, { "--count", "0" }, { "abc" },
					     { "1", "2" }, { "--watch", "0.001" } };
	for (unsigned i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		const char *argv[7] = { kvt_path("kvtier"), "stat" };
		for (int j = 0; j < 4 && bad[i][j]; j++)
			argv[j + 2] = bad[i][j];
		CU_ASSERT_FATAL(kvt_run(&rc, argv, NULL) == 0);
		CU_ASSERT_EQUAL(rc.exit_code, 2);
		CU_ASSERT_PTR_NOT_NULL(strstr(rc.err, "usage: kvtier stat"));
	}
	const char *help[] = { kvt_path("kvtier"), "stat", "--help", NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, help, NULL) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(rc.out, "--prometheus"));
	/* --watch without a terminal is bounded by --count */
	const char *watch[] = { kvt_path("kvtier"), "stat", "--watch", "0.05", "--count", "3", NULL };
	CU_ASSERT_FATAL(kvt_run(&rc, watch, NULL) == 0);
	CU_ASSERT_EQUAL(rc.exit_code, 0);
	unsigned heads = 0;
	for (const char *q = rc.out; (q = strstr(q, "no process of this user")); q++)
		heads++;
	for (const char *q = rc.out; (q = strstr(q, "     pid command")); q++)
		heads++;
	CU_ASSERT(heads >= 3);
}

int main(void)
{
	CU_TestInfo tests[] = {
		{ "a running workload read by kvtier stat: text, list, prometheus, plausible",
		  test_live_workload },
		{ "per device: budget in force from the first epoch, HBM, faults, link bytes; "
		  "prometheus -o FILE atomic", test_live_devices },
		{ "-o FILE: unwritable directory 1, mode, no value 2", test_output_file_errors },
		{ "a planted symlink is never followed; nothing published, one warning",
		  test_symlink_never_followed },
		{ "a 0644 segment is refused; 0600 read; newer version refused", test_mode_0644_refused },
		{ "segment 0600 while running; KVTIER_STATS=0 creates none", test_stats_off },
		{ "segments of exited processes are swept, nothing else", test_stale_segments_swept },
		{ "stat usage errors 2, --help 0, --watch bounded by --count", test_usage },
		CU_TEST_INFO_NULL,
	};
	CU_SuiteInfo suites[] = {
		{ "stat", suite_init, suite_clean, NULL, NULL, tests },
		CU_SUITE_INFO_NULL,
	};
	return kvt_test_main(suites);
}
