/* SPDX-License-Identifier: MIT */
/* Offline symbolization of one module file through elfutils' libdwfl (for
 * `kvtier report` and `kvtier policy suggest`): ELF symbols, demangled C++
 * names, file:line with inline frames from DWARF (separate debug files
 * found by libdwfl's standard callbacks) and, when the file on disk is not
 * the one the trace recorded, lookup by GNU build id. Tool-side only: it
 * allocates and reads files; libkvtier never links libdw. */
#ifndef KVT_TOOLS_DWSYM_H
#define KVT_TOOLS_DWSYM_H

#include <stddef.h>
#include <stdint.h>

#define KVT_DWSYM_DEPTH 4u              /* inline levels kept per address */

struct kvt_dwsym;                       /* one module: opaque */

struct kvt_dwsym_args {
	const char *path;               /* the module's path as recorded */
	const uint8_t *build_id;        /* the recorded build id, or NULL */
	unsigned build_id_len;          /* 0: none recorded (an older trace) */
	uint64_t lo, hi;                /* its mapped span in file addresses */
	const char *debuginfo_path;     /* libdwfl syntax; NULL: ":.debug:/usr/lib/debug" */
};

struct kvt_dwsym_frame {
	char func[768];                 /* demangled; "" when unknown */
	char file[256];                 /* source file as DWARF names it; "" when unknown */
	unsigned line;                  /* 0 when unknown */
};

struct kvt_dwsym_loc {
	char symbol[512];               /* the ELF symbol holding the address, raw
					 * (mangled), as dladdr in a hook sees it; "" */
	uint64_t sym_off;               /* address - that symbol's start */
	unsigned nr;                    /* fr[0]: innermost (an inlined callee, or the */
	struct kvt_dwsym_frame fr[KVT_DWSYM_DEPTH];  /* function); fr[nr-1]: outermost */
};

/* Open one module. 0 with *out set, or a negative errno (-ENOENT: no file
 * found; -ENOEXEC: not a usable ELF file). *note gets one line for the
 * reader whenever something is off (file missing, build id differs, the
 * file used instead), "" otherwise. */
int kvt_dwsym_open(struct kvt_dwsym **out, const struct kvt_dwsym_args *a,
		   char *note, size_t note_len);
/* Where ELF virtual address vaddr is: 1 with *loc filled when a symbol or a
 * source line is known, 0 when nothing is. */
int kvt_dwsym_lookup(struct kvt_dwsym *s, uint64_t vaddr, struct kvt_dwsym_loc *loc);
/* The file the names come from (the recorded path, or the one found by
 * build id). */
const char *kvt_dwsym_file(const struct kvt_dwsym *s);
void kvt_dwsym_close(struct kvt_dwsym *s);

/* A C++ symbol demangled into buf (libstdc++'s __cxa_demangle, loaded at
 * run time); any other name, or when it cannot demangle, name copied. */
const char *kvt_dwsym_demangle(const char *name, char *buf, size_t len);

/* Lower-case hex of a build id into buf (at least 2 * len + 1 bytes). */
const char *kvt_dwsym_hex(const uint8_t *id, unsigned len, char *buf, size_t buf_len);

#endif
