// SPDX-License-Identifier: MIT
/* One module's symbols through libdwfl (contract in dwsym.h). Each module
 * gets its own Dwfl session, reported at file addresses (bias 0 for the
 * addresses a trace's frames are stored at), so modules of several traces
 * never overlap. Tool-side only. */
#include <dlfcn.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dwsym.h"

struct kvt_dwsym {
	Dwfl *dwfl;
	Dwfl_Module *mod;
	Dwarf_Addr bias;                /* module address = file vaddr + bias */
	Dwfl_Callbacks cb;              /* the session keeps a pointer to it */
	char *debuginfo_path;           /* cb.debuginfo_path points here */
	char file[512];                 /* where the names come from */
};

/* ---- names ---- */

typedef char *(*cxa_demangle_fn)(const char *, char *, size_t *, int *);

const char *kvt_dwsym_demangle(const char *name, char *buf, size_t len)
{
	static cxa_demangle_fn demangle;
	static int tried;
	if (!tried) {
		tried = 1;
		void *h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
		if (h)
			*(void **)&demangle = dlsym(h, "__cxa_demangle");
	}
	int status = -1;
	char *d = demangle && !strncmp(name, "_Z", 2) ? demangle(name, NULL, NULL, &status) : NULL;
	snprintf(buf, len, "%s", d && !status ? d : name);
	free(d);
	return buf;
}

const char *kvt_dwsym_hex(const uint8_t *id, unsigned len, char *buf, size_t buf_len)
{
	size_t j = 0;
	for (unsigned i = 0; i < len && j + 3 <= buf_len; i++, j += 2)
		snprintf(buf + j, 3, "%02x", id[i]);
	if (buf_len)
		buf[j < buf_len ? j : buf_len - 1] = 0;
	return buf;
}

/* ---- opening ---- */

static const char *base_name(const char *path)
{
	const char *b = strrchr(path, '/');
	return b ? b + 1 : path;
}

static struct kvt_dwsym *session(const char *debuginfo_path)
{
	struct kvt_dwsym *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	s->cb.find_elf = dwfl_build_id_find_elf;
	s->cb.find_debuginfo = dwfl_standard_find_debuginfo;
	if (debuginfo_path) {
		s->debuginfo_path = strdup(debuginfo_path);
		s->cb.debuginfo_path = &s->debuginfo_path;
	}
	s->dwfl = dwfl_begin(&s->cb);
	if (!s->dwfl || (debuginfo_path && !s->debuginfo_path)) {
		kvt_dwsym_close(s);
		return NULL;
	}
	return s;
}

/* The module from the file at path, at its own addresses. */
static int report_file(struct kvt_dwsym *s, const char *path)
{
	dwfl_report_begin(s->dwfl);
	s->mod = dwfl_report_elf(s->dwfl, base_name(path), path, -1, 0, false);
	dwfl_report_end(s->dwfl, NULL, NULL);
	if (!s->mod || !dwfl_module_getelf(s->mod, &s->bias))
		return -ENOEXEC;
	snprintf(s->file, sizeof s->file, "%s", path);
	return 0;
}

/* The module found by build id alone (the debuginfo path's .build-id
 * links, and debuginfod when DEBUGINFOD_URLS is set). */
static int report_by_id(struct kvt_dwsym *s, const struct kvt_dwsym_args *a)
{
	dwfl_report_begin(s->dwfl);
	s->mod = dwfl_report_module(s->dwfl, base_name(a->path), a->lo,
				    a->hi > a->lo ? a->hi : a->lo + 1);
	if (s->mod && dwfl_module_report_build_id(s->mod, a->build_id, a->build_id_len, 0))
		s->mod = NULL;
	dwfl_report_end(s->dwfl, NULL, NULL);
	if (!s->mod || !dwfl_module_getelf(s->mod, &s->bias))
		return -ENOENT;
	const char *found = NULL;
	dwfl_module_info(s->mod, NULL, NULL, NULL, NULL, NULL, &found, NULL);
	snprintf(s->file, sizeof s->file, "%s", found ? found : "(by build id)");
	return 0;
}

/* 1 when the opened file carries the recorded build id. */
static int same_id(struct kvt_dwsym *s, const struct kvt_dwsym_args *a, char *hex, size_t len)
{
	const unsigned char *bits = NULL;
	GElf_Addr at;
	int n = dwfl_module_build_id(s->mod, &bits, &at);
	if (n > 0)
		kvt_dwsym_hex(bits, (unsigned)n, hex, len);
	return n == (int)a->build_id_len && !memcmp(bits, a->build_id, a->build_id_len);
}

static int open_checked(struct kvt_dwsym **out, const struct kvt_dwsym_args *a,
			char *note, size_t len)
{
	char want[2 * 64 + 1], have[2 * 64 + 1];
	struct stat st;
	int missing = stat(a->path, &st) ? errno : 0;
	kvt_dwsym_hex(a->build_id, a->build_id_len, want, sizeof want);
	struct kvt_dwsym *s = session(a->debuginfo_path), *f = NULL;
	if (!s)
		return -ENOMEM;
	int unreadable = missing ? 1 : report_file(s, a->path);
	snprintf(have, sizeof have, "none");
	if (!unreadable && same_id(s, a, have, sizeof have)) {
		*out = s;
		return 0;
	}
	if (!missing) {                 /* keep the changed file as the last resort */
		f = s;
		s = session(a->debuginfo_path);
		if (!s) {
			kvt_dwsym_close(f);
			return -ENOMEM;
		}
	}
	int ret = report_by_id(s, a);
	if (!ret) {
		snprintf(note, len, "module %s: %s; using %s, found by the trace's build id %s",
			 a->path, missing ? "file not found" : "the file on disk has another build id",
			 s->file, want);
		kvt_dwsym_close(f);
		*out = s;
		return 0;
	}
	kvt_dwsym_close(s);
	if (missing) {
		snprintf(note, len, "module %s: %s, and no file with its build id %s in the "
			 "debuginfo path: its frames are shown as ?", a->path, strerror(missing), want);
		return -ENOENT;
	}
	if (unreadable) {
		snprintf(note, len, "module %s: not a readable ELF file, and no file with its "
			 "build id %s in the debuginfo path: its frames are shown as ?", a->path, want);
		kvt_dwsym_close(f);
		return -ENOEXEC;
	}
	snprintf(note, len, "module %s: build id of the file on disk (%s) differs from the "
		 "trace's (%s), and no file with the trace's build id was found: it was rebuilt "
		 "or replaced since the trace, so its names may be wrong", a->path, have, want);
	*out = f;
	return 0;
}

int kvt_dwsym_open(struct kvt_dwsym **out, const struct kvt_dwsym_args *a,
		   char *note, size_t note_len)
{
	*out = NULL;
	if (note_len)
		note[0] = 0;
	if (a->build_id_len)
		return open_checked(out, a, note, note_len);
	/* an older trace: no build id to check the file against */
	struct stat st;
	if (stat(a->path, &st)) {
		int e = errno;
		snprintf(note, note_len, "module %s: %s: its frames are shown as ?", a->path,
			 strerror(e));
		return -e;
	}
	struct kvt_dwsym *s = session(a->debuginfo_path);
	if (!s)
		return -ENOMEM;
	if (report_file(s, a->path)) {
		snprintf(note, note_len, "module %s: not a readable ELF file (%s): its frames "
			 "are shown as ?", a->path, dwfl_errmsg(-1));
		kvt_dwsym_close(s);
		return -ENOEXEC;
	}
	*out = s;
	return 0;
}

const char *kvt_dwsym_file(const struct kvt_dwsym *s)
{
	return s->file;
}

void kvt_dwsym_close(struct kvt_dwsym *s)
{
	if (!s)
		return;
	if (s->dwfl)
		dwfl_end(s->dwfl);
	free(s->debuginfo_path);
	free(s);
}

/* ---- lookups ---- */

static const char *die_string(Dwarf_Die *d, int at)
{
	Dwarf_Attribute a;
	return dwarf_formstring(dwarf_attr_integrate(d, at, &a));
}

/* A function DIE's name, demangled from its linkage name when it has one. */
static void die_func(Dwarf_Die *d, char *buf, size_t len)
{
	const char *n = die_string(d, DW_AT_linkage_name);
	if (!n)
		n = die_string(d, DW_AT_MIPS_linkage_name);
	if (n) {
		kvt_dwsym_demangle(n, buf, len);
		return;
	}
	n = die_string(d, DW_AT_name);
	snprintf(buf, len, "%s", n ? n : "");
}

/* Where an inlined scope was called from: file and line in its caller. */
static void call_site(Dwarf_Die *cu, Dwarf_Die *inl, const char **file, int *line)
{
	Dwarf_Attribute a;
	Dwarf_Word idx = 0, ln = 0;
	Dwarf_Files *files;
	size_t nr = 0;
	*file = NULL;
	*line = 0;
	if (!dwarf_formudata(dwarf_attr(inl, DW_AT_call_line, &a), &ln))
		*line = (int)ln;
	if (!dwarf_formudata(dwarf_attr(inl, DW_AT_call_file, &a), &idx) &&
	    !dwarf_getsrcfiles(cu, &files, &nr) && idx < nr)
		*file = dwarf_filesrc(files, idx, NULL, NULL);
}

static void set_frame(struct kvt_dwsym_frame *fr, const char *file, int line)
{
	snprintf(fr->file, sizeof fr->file, "%s", file ? file : "");
	fr->line = line > 0 && file ? (unsigned)line : 0;
}

/* The inline chain at module address a, innermost first. */
static unsigned inline_chain(struct kvt_dwsym *s, Dwarf_Addr a, struct kvt_dwsym_loc *loc,
			     int *whole)
{
	const char *file = NULL;
	int line = 0;
	Dwfl_Line *ln = dwfl_module_getsrc(s->mod, a);
	if (ln)
		file = dwfl_lineinfo(ln, NULL, &line, NULL, NULL, NULL);
	Dwarf_Addr cubias = 0;
	Dwarf_Die *cu = dwfl_module_addrdie(s->mod, a, &cubias), *scopes = NULL;
	int n = cu ? dwarf_getscopes(cu, a - cubias, &scopes) : 0;
	if (n > 0) {
		/* getscopes continues an inlined scope through its abstract
		 * origin; the DIE's own parents give the functions it sits in */
		Dwarf_Die *phys = NULL;
		int m = dwarf_getscopes_die(&scopes[0], &phys);
		free(scopes);
		scopes = phys;
		n = m;
	}
	unsigned k = 0;
	for (int i = 0; i < n && k < KVT_DWSYM_DEPTH; i++) {
		int tag = dwarf_tag(&scopes[i]);
		if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_subprogram)
			continue;
		struct kvt_dwsym_frame *fr = &loc->fr[k++];
		die_func(&scopes[i], fr->func, sizeof fr->func);
		set_frame(fr, file, line);
		if (tag == DW_TAG_subprogram) {
			*whole = 1;     /* the chain reached the out-of-line function */
			break;
		}
		call_site(cu, &scopes[i], &file, &line);
	}
	free(scopes);
	if (!k && file) {               /* a line but no scope: name from the symbol */
		set_frame(&loc->fr[0], file, line);
		loc->fr[0].func[0] = 0;
		*whole = 1;
		k = 1;
	}
	return k;
}

int kvt_dwsym_lookup(struct kvt_dwsym *s, uint64_t vaddr, struct kvt_dwsym_loc *loc)
{
	Dwarf_Addr a = vaddr + s->bias;
	GElf_Off off = 0;
	GElf_Sym sym;
	loc->symbol[0] = 0;
	loc->sym_off = 0;
	const char *name = dwfl_module_addrinfo(s->mod, a, &off, &sym, NULL, NULL, NULL);
	if (name) {
		snprintf(loc->symbol, sizeof loc->symbol, "%s", name);
		loc->sym_off = off;
	}
	int whole = 0;
	loc->nr = inline_chain(s, a, loc, &whole);
	if (!loc->nr && name) {
		loc->fr[0].file[0] = 0;
		loc->fr[0].line = 0;
		loc->nr = 1;
		whole = 1;
	}
	/* the outermost frame is the function the ELF symbol names: its
	 * demangled symbol is exact (DWARF may hold only a short name) */
	if (whole && name)
		kvt_dwsym_demangle(name, loc->fr[loc->nr - 1].func, sizeof loc->fr[0].func);
	return loc->nr > 0;
}
