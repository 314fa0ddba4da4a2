// SPDX-License-Identifier: MIT
/* Text from traces as HTML (contract in html_text.h): names of functions,
 * files and modules, notes, any byte. Offline only; never in libkvtier. */
#include <string.h>

#include "html_text.h"
#include "json.h"

/* The entity of an ASCII byte that HTML text must not hold as it is, or
 * NULL. */
static const char *entity(unsigned char c)
{
	switch (c) {
	case '<': return "&lt;";
	case '>': return "&gt;";
	case '&': return "&amp;";
	case '"': return "&quot;";
	default: return NULL;
	}
}

/* U+FFFE and U+FFFF are valid UTF-8 but no XML character. */
static int xml_nonchar(const unsigned char *p, size_t len)
{
	return len == 3 && p[0] == 0xef && p[1] == 0xbf && p[2] >= 0xbe;
}

void kvt_html_textn(FILE *f, const char *s, size_t n, size_t max)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t chars = 0;
	for (size_t i = 0; i < n; chars++) {
		size_t len = kvt_utf8_len(p + i, n - i);
		if (chars == max) {
			fputs("&#8230;", f);
			return;
		}
		if (len == 1 && entity(p[i]))
			fputs(entity(p[i]), f);
		else if (len == 1 && (p[i] == '\n' || p[i] == '\t' || (p[i] >= 0x20 && p[i] < 0x7f)))
			fputc(p[i], f);
		else if (len > 1 && !xml_nonchar(p + i, len))
			fwrite(p + i, 1, len, f);
		else
			fputs("&#xfffd;", f);
		i += len ? len : 1;
	}
}

void kvt_html_text(FILE *f, const char *s)
{
	kvt_html_textn(f, s ? s : "", s ? strlen(s) : 0, SIZE_MAX);
}
