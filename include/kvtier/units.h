/* SPDX-License-Identifier: MIT */
/* Parsing of option values shared by the options table and the policy
 * language: sizes with K/M/G/T suffixes, booleans, plain integers.
 * Pure functions: no allocation, no syscalls, no locale. */
#ifndef KVTIER_UNITS_H
#define KVTIER_UNITS_H

#include <stddef.h>
#include <stdint.h>

/* "4096", "64K", "2M", "8G", "1T", "1.5G", optional "B"/"iB" ("8GiB");
 * binary multiples (K = 1024). Returns 0, or -EINVAL (syntax), -ERANGE
 * (overflow). *end_out (may be NULL) gets the first unparsed character when
 * the caller allows trailing text (allow_trailing != 0). */
int kvt_parse_size(const char *s, uint64_t *out, const char **end_out,
		   int allow_trailing);

/* 1/0/on/off/yes/no/true/false (any case). 0 or -EINVAL. */
int kvt_parse_bool(const char *s, int *out);

/* Decimal signed integer within [min, max]. 0, -EINVAL or -ERANGE. */
int kvt_parse_int(const char *s, long long min, long long max, long long *out);

/* Human form of a byte count ("1.5 GiB") into buf; returns buf. */
char *kvt_format_size(uint64_t bytes, char *buf, size_t len);

/* A byte count as the options table and the rules read it back: the largest
 * K/M/G/T suffix that divides it exactly ("84M", "1536K", "4097", "0") into
 * buf; returns buf. */
char *kvt_format_size_exact(uint64_t bytes, char *buf, size_t len);

#endif
