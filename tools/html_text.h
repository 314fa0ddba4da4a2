/* SPDX-License-Identifier: MIT */
/* The one HTML text escaper of the kvtier command (the report's HTML).
 * Offline only: stdio, never linked into libkvtier. */
#ifndef KVT_TOOLS_HTML_TEXT_H
#define KVT_TOOLS_HTML_TEXT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* n bytes of s as HTML/XML text: '<', '>', '&' and '"' as entities, valid
 * UTF-8 (kvt_utf8_len, json.h), newlines and tabs kept as they are, every
 * other byte (a control, DEL, a byte of no valid sequence) and U+FFFE and
 * U+FFFF (no XML characters) as &#xfffd;; at most max characters, then
 * &#8230; (an ellipsis) when some are left (SIZE_MAX: all). */
void kvt_html_textn(FILE *f, const char *s, size_t n, size_t max);
/* The same for a string, all of it; NULL is written as nothing. */
void kvt_html_text(FILE *f, const char *s);

#endif
