/* web_assets: the front-end files of results/web/, embedded at build time
 * by scripts/embed_files.py (results/web/meson.build). */
#ifndef BF_WEB_ASSETS_H
#define BF_WEB_ASSETS_H

#include <stddef.h>

extern const char bf_web_report_html[], bf_web_report_js[],
    bf_web_report_css[], bf_web_uPlot_iife_min_js[], bf_web_uPlot_min_css[],
    bf_web_dashboard_html[], bf_web_dashboard_js[], bf_web_dashboard_css[];
extern const size_t bf_web_report_html_len, bf_web_report_js_len,
    bf_web_report_css_len, bf_web_uPlot_iife_min_js_len,
    bf_web_uPlot_min_css_len, bf_web_dashboard_html_len,
    bf_web_dashboard_js_len, bf_web_dashboard_css_len;

#endif
