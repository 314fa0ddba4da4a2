/* SPDX-License-Identifier: MIT */
/* Helpers shared by the report printers (text, JSON, HTML). */
#ifndef KVT_TOOLS_REPORT_OUT_H
#define KVT_TOOLS_REPORT_OUT_H

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "report.h"

/* "function (module+0xoff)" of a frame, then " at file.cc:LINE" where the
 * debug info says, then ", inlined into g at f.cc:L" for each function it
 * was inlined into; "? (0xip)" outside every module. */
const char *kvt_rpt_frame_label(struct kvt_report *r, const struct kvt_rpt_frame *f,
				char *buf, size_t len);
const char *kvt_rpt_site_label(struct kvt_report *r, uint32_t site, char *buf, size_t len);
/* The last component of a path. */
const char *kvt_rpt_base_name(const char *path);

#endif
