/* web_page: a page of the front-end (results/web/) filled in.  A template's
 * markers stand for embedded files or data; the report writes its page once
 * into a self-contained file, the dashboard renders its page once at start
 * and serves it. */
#ifndef BF_WEB_PAGE_H
#define BF_WEB_PAGE_H

#include <stdio.h>
#include <jansson.h>

#include "web_assets.h"

/* Writes template (bf_web_report_html, bf_web_dashboard_html) to out with
 * each marker replaced: the marker for an embedded file (uPlot.iife.min.js,
 * report.js, ...) by that file, the "data" marker by data as JSON escaped
 * for a <script> element.  0, or -1 (a marker that names nothing is
 * reported on stderr; a write error is not). */
int bf_web_page_write(FILE *out, const char *template, const json_t *data);

#endif
