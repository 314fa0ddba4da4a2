// SPDX-License-Identifier: MIT
/* ELF64 function-symbol table of one file (contract in elfsym.h). Reads the
 * section headers of a read-only mapping; never trusts an offset it has not
 * checked against the mapping's size. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "elfsym.h"

/* [off, off + len) lies inside the mapping. */
static int in_map(const struct kvt_elfsym *e, uint64_t off, uint64_t len)
{
	return off <= e->map_bytes && len <= e->map_bytes - off;
}

static int cmp_ent(const void *a, const void *b)
{
	const struct kvt_elfsym_ent *x = a, *y = b;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return (x->size < y->size) - (x->size > y->size);   /* biggest first */
}

static const Elf64_Shdr *find_symtab(const struct kvt_elfsym *e, const Elf64_Ehdr *eh,
				     uint32_t type)
{
	const Elf64_Shdr *sh = (const Elf64_Shdr *)((const char *)e->map + eh->e_shoff);
	for (unsigned i = 0; i < eh->e_shnum; i++)
		if (sh[i].sh_type == type && sh[i].sh_link < eh->e_shnum &&
		    sh[i].sh_entsize == sizeof(Elf64_Sym))
			return &sh[i];
	return NULL;
}

static int load_syms(struct kvt_elfsym *e, const Elf64_Ehdr *eh, const Elf64_Shdr *st)
{
	const Elf64_Shdr *sh = (const Elf64_Shdr *)((const char *)e->map + eh->e_shoff);
	const Elf64_Shdr *str = &sh[st->sh_link];
	if (!in_map(e, st->sh_offset, st->sh_size) || !in_map(e, str->sh_offset, str->sh_size))
		return -ENOEXEC;
	const char *strs = (const char *)e->map + str->sh_offset;
	size_t n = st->sh_size / sizeof(Elf64_Sym);
	const Elf64_Sym *sym = (const Elf64_Sym *)((const char *)e->map + st->sh_offset);
	e->syms = calloc(n ? n : 1, sizeof *e->syms);
	if (!e->syms)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		unsigned t = ELF64_ST_TYPE(sym[i].st_info);
		if ((t != STT_FUNC && t != STT_GNU_IFUNC) || sym[i].st_shndx == SHN_UNDEF ||
		    !sym[i].st_value || sym[i].st_name >= str->sh_size)
			continue;
		const char *name = strs + sym[i].st_name;
		if (!memchr(name, 0, str->sh_size - sym[i].st_name) || !*name)
			continue;
		e->syms[e->nr_syms++] = (struct kvt_elfsym_ent){ sym[i].st_value,
								 sym[i].st_size, name };
	}
	qsort(e->syms, e->nr_syms, sizeof *e->syms, cmp_ent);
	return 0;
}

int kvt_elfsym_open(struct kvt_elfsym *e, const char *path)
{
	memset(e, 0, sizeof *e);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat sb;
	int ret = -ENOEXEC;
	if (fstat(fd, &sb) || !S_ISREG(sb.st_mode) || (uint64_t)sb.st_size < sizeof(Elf64_Ehdr))
		goto out;
	e->map_bytes = (size_t)sb.st_size;
	e->map = mmap(NULL, e->map_bytes, PROT_READ, MAP_PRIVATE, fd, 0);
	if (e->map == MAP_FAILED) {
		e->map = NULL;
		ret = -errno;
		goto out;
	}
	const Elf64_Ehdr *eh = e->map;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_ident[EI_DATA] != ELFDATA2LSB || eh->e_shentsize != sizeof(Elf64_Shdr) ||
	    !in_map(e, eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr)) ||
	    eh->e_shoff % 8)
		goto out;
	const Elf64_Shdr *st = find_symtab(e, eh, SHT_SYMTAB);
	if (!st) {
		st = find_symtab(e, eh, SHT_DYNSYM);
		e->from_dynsym = 1;
	}
	ret = st ? load_syms(e, eh, st) : 0;
out:
	close(fd);
	if (ret)
		kvt_elfsym_close(e);
	return ret;
}

const char *kvt_elfsym_lookup(const struct kvt_elfsym *e, uint64_t vaddr, uint64_t *off)
{
	size_t lo = 0, hi = e->nr_syms;         /* first entry with addr > vaddr */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (e->syms[mid].addr <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return NULL;
	const struct kvt_elfsym_ent *s = &e->syms[lo - 1];
	/* aliases share an address: qsort put the biggest size first */
	while (lo >= 2 && e->syms[lo - 2].addr == s->addr)
		s = &e->syms[--lo - 1];
	if (s->size && vaddr - s->addr >= s->size)
		return NULL;
	if (off)
		*off = vaddr - s->addr;
	return s->name;
}

void kvt_elfsym_close(struct kvt_elfsym *e)
{
	if (e->map)
		munmap(e->map, e->map_bytes);
	free(e->syms);
	memset(e, 0, sizeof *e);
}
