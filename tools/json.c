// SPDX-License-Identifier: MIT
/* JSON strings for every JSON the kvtier command writes (contract in
 * json.h): file names, function names and notes come from traces and sysfs
 * and may hold any byte. Offline only; never in libkvtier. */
#include <string.h>

#include "json.h"

size_t kvt_utf8_len(const unsigned char *s, size_t n)
{
	unsigned char c = s[0];
	size_t len;
	unsigned char lo = 0x80, hi = 0xbf;     /* the second byte's range */
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		len = 2;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4;
	else
		return 0;                       /* continuation, 0xc0/0xc1, 0xf5.. */
	if (c == 0xe0)
		lo = 0xa0;                      /* overlong */
	else if (c == 0xed)
		hi = 0x9f;                      /* surrogates */
	else if (c == 0xf0)
		lo = 0x90;                      /* overlong */
	else if (c == 0xf4)
		hi = 0x8f;                      /* past U+10FFFF */
	if (n < len || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	return len;
}

static void put_escaped(FILE *f, unsigned char c)
{
	static const char short_form[] = { ['\b'] = 'b', ['\f'] = 'f', ['\n'] = 'n',
					   ['\r'] = 'r', ['\t'] = 't' };
	if (c == '"' || c == '\\')
		fprintf(f, "\\%c", c);
	else if (c < sizeof short_form && short_form[c])
		fprintf(f, "\\%c", short_form[c]);
	else
		fprintf(f, "\\u%04x", c);
}

/* html: '<', '>' and '&' as \u003c, \u003e, \u0026 too. */
static void json_strn(FILE *f, const char *s, size_t n, int html)
{
	const unsigned char *p = (const unsigned char *)s;
	fputc('"', f);
	for (size_t i = 0; i < n;) {
		size_t len = kvt_utf8_len(p + i, n - i);
		if (!len) {
			fputs("\\ufffd", f);
			i++;
		} else if (len == 1 && (p[i] < 0x20 || p[i] == '"' || p[i] == '\\' ||
					(html && (p[i] == '<' || p[i] == '>' || p[i] == '&')))) {
			put_escaped(f, p[i++]);
		} else {
			fwrite(p + i, 1, len, f);
			i += len;
		}
	}
	fputc('"', f);
}

void kvt_json_strn(FILE *f, const char *s, size_t n)
{
	json_strn(f, s, n, 0);
}

void kvt_json_str(FILE *f, const char *s)
{
	json_strn(f, s ? s : "", s ? strlen(s) : 0, 0);
}

void kvt_json_str_html(FILE *f, const char *s)
{
	json_strn(f, s ? s : "", s ? strlen(s) : 0, 1);
}
