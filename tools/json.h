/* SPDX-License-Identifier: MIT */
/* The one JSON string writer of the kvtier command (report, topo, ...).
 * Offline only: stdio, never linked into libkvtier. */
#ifndef KVT_TOOLS_JSON_H
#define KVT_TOOLS_JSON_H

#include <stddef.h>
#include <stdio.h>

/* s as a quoted JSON string on f: valid UTF-8 passes through unchanged,
 * '"' and '\\' are escaped, control bytes (< 0x20) take the short forms
 * (\n, \t, ...) or \u00XX, and every byte that is not part of a valid UTF-8
 * sequence (a stray continuation, an overlong form, a surrogate, past
 * U+10FFFF, cut short) is written as \ufffd. NULL is written as "". */
void kvt_json_str(FILE *f, const char *s);
/* The same for n bytes (NULs among them written as \u0000). */
void kvt_json_strn(FILE *f, const char *s, size_t n);
/* The same, with '<', '>' and '&' also escaped (\u003c, \u003e, \u0026):
 * safe as the text of an HTML <script type="application/json"> element and
 * of an XML one (no "</script", no "]]>", no markup). */
void kvt_json_str_html(FILE *f, const char *s);

/* The length of the valid UTF-8 sequence at s (n > 0 bytes left), 0 when
 * the byte at s does not start one (RFC 3629: no overlongs, no surrogates,
 * nothing past U+10FFFF, not cut short). 1 for every ASCII byte. */
size_t kvt_utf8_len(const unsigned char *s, size_t n);

#endif
