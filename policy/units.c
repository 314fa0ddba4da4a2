// SPDX-License-Identifier: MIT
/* Option-value parsing shared by the options table and KVTIER_POLICY.
 * Pure: no allocation, no syscalls, no locale (callers run inside hooks'
 * init path and in fuzzers). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "kvtier/units.h"

static int lower(int c)
{
	return (c >= 'A' && c <= 'Z') ? c + 32 : c;
}

static int suffix_shift(int c)
{
	switch (lower(c)) {
	case 'k': return 10;
	case 'm': return 20;
	case 'g': return 30;
	case 't': return 40;
	case 'p': return 50;
	default:  return -1;
	}
}

int kvt_parse_size(const char *s, uint64_t *out, const char **end_out,
		   int allow_trailing)
{
	if (!s || !out)
		return -EINVAL;
	const char *p = s;
	uint64_t whole = 0;
	int digits = 0;
	while (*p >= '0' && *p <= '9') {
		uint64_t d = (uint64_t)(*p - '0');
		if (whole > (UINT64_MAX - d) / 10)
			return -ERANGE;
		whole = whole * 10 + d;
		p++;
		digits++;
	}
	/* Up to 9 fractional digits, kept as a fraction of 10^9. */
	uint64_t frac = 0, frac_den = 1;
	if (*p == '.') {
		p++;
		while (*p >= '0' && *p <= '9') {
			if (frac_den < 1000000000ull) {
				frac = frac * 10 + (uint64_t)(*p - '0');
				frac_den *= 10;
			}
			p++;
			digits++;
		}
	}
	if (!digits)
		return -EINVAL;
	int shift = suffix_shift(*p);
	if (shift >= 0) {
		p++;
		if (lower(*p) == 'i' && lower(p[1]) == 'b')
			p += 2;
		else if (lower(*p) == 'b')
			p++;
	} else {
		shift = 0;
		if (lower(*p) == 'b')
			p++;
	}
	if (!allow_trailing && *p)
		return -EINVAL;
	if (shift && whole > (UINT64_MAX >> shift))
		return -ERANGE;
	uint64_t v = whole << shift;
	if (frac) {
		/* frac/frac_den of one unit; frac_den <= 1e9 and shift <= 50, so
		 * split the multiply to stay in 64 bits. */
		uint64_t unit = 1ull << shift;
		uint64_t add = (unit / frac_den) * frac +
			       ((unit % frac_den) * frac) / frac_den;
		if (v > UINT64_MAX - add)
			return -ERANGE;
		v += add;
	}
	*out = v;
	if (end_out)
		*end_out = p;
	return 0;
}

static int eq_nocase(const char *a, const char *b)
{
	while (*a && *b && lower(*a) == lower(*b)) {
		a++;
		b++;
	}
	return *a == 0 && *b == 0;
}

int kvt_parse_bool(const char *s, int *out)
{
	static const char *const yes[] = { "1", "on", "yes", "true", "y" };
	static const char *const no[] = { "0", "off", "no", "false", "n" };
	if (!s || !out)
		return -EINVAL;
	for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
		if (eq_nocase(s, yes[i])) {
			*out = 1;
			return 0;
		}
		if (eq_nocase(s, no[i])) {
			*out = 0;
			return 0;
		}
	}
	return -EINVAL;
}

int kvt_parse_int(const char *s, long long min, long long max, long long *out)
{
	if (!s || !out)
		return -EINVAL;
	int neg = 0;
	const char *p = s;
	if (*p == '-' || *p == '+')
		neg = *p++ == '-';
	if (!(*p >= '0' && *p <= '9'))
		return -EINVAL;
	unsigned long long v = 0;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (9223372036854775808ull - (unsigned)(*p - '0')) / 10)
			return -ERANGE;
		v = v * 10 + (unsigned)(*p - '0');
	}
	if (*p)
		return -EINVAL;
	if (!neg && v > 9223372036854775807ull)
		return -ERANGE;
	long long r = neg ? (long long)(0 - v) : (long long)v;
	if (r < min || r > max)
		return -ERANGE;
	*out = r;
	return 0;
}

char *kvt_format_size(uint64_t bytes, char *buf, size_t len)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	int u = 0;
	double v = (double)bytes;
	while (v >= 1024.0 && u < 5) {
		v /= 1024.0;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
	else
		snprintf(buf, len, "%.1f %s", v, unit[u]);
	return buf;
}

char *kvt_format_size_exact(uint64_t bytes, char *buf, size_t len)
{
	static const char suffix[] = "KMGT";
	int i = -1;
	while (bytes && i < 3 && (bytes & 1023) == 0) {
		bytes >>= 10;
		i++;
	}
	if (i < 0)
		snprintf(buf, len, "%llu", (unsigned long long)bytes);
	else
		snprintf(buf, len, "%llu%c", (unsigned long long)bytes, suffix[i]);
	return buf;
}
