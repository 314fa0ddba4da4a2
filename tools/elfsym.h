/* SPDX-License-Identifier: MIT */
/* Offline symbol lookup in one ELF64 file (for `kvtier report`): maps the
 * file read-only, reads .symtab (else .dynsym) and keeps a sorted table of
 * its function symbols. Every offset in the file is checked against its
 * size: a hostile or truncated file gives an error, never a crash. Tool-side
 * only (allocates, uses stdio). */
#ifndef KVT_TOOLS_ELFSYM_H
#define KVT_TOOLS_ELFSYM_H

#include <stddef.h>
#include <stdint.h>

struct kvt_elfsym_ent {
	uint64_t addr, size;
	const char *name;               /* points into the mapping */
};

struct kvt_elfsym {
	void *map;
	size_t map_bytes;
	struct kvt_elfsym_ent *syms;    /* sorted by addr */
	size_t nr_syms;
	int from_dynsym;                /* 1: no .symtab, .dynsym used */
};

/* 0, or a negative errno (-ENOEXEC: not an ELF64 little-endian file). */
int kvt_elfsym_open(struct kvt_elfsym *e, const char *path);
/* The function holding ELF virtual address vaddr, or NULL; *off (may be
 * NULL) gets vaddr - the symbol's start. */
const char *kvt_elfsym_lookup(const struct kvt_elfsym *e, uint64_t vaddr, uint64_t *off);
void kvt_elfsym_close(struct kvt_elfsym *e);

#endif
