/* web_page: templates of results/web/ with their markers filled in. */
#include "web_page.h"

#include <string.h>

/* Writes JSON text into a <script> element: '<' only occurs inside JSON
 * strings, where \u003c means the same, so no "</script>" or "<!--" in a
 * sweep file can end or confuse the element. */
static int write_script_json(const char *buffer, size_t size, void *out)
{
    for (size_t i = 0; i < size; i++)
        if (buffer[i] == '<' ? fputs("\\u003c", out) < 0
                             : fputc(buffer[i], out) == EOF)
            return -1;
    return 0;
}

/* The text a /\*@NAME@*\/ marker of a template stands for. */
static int write_asset(FILE *out, const char *name, size_t len,
                       const json_t *data)
{
    static const struct {
        const char *name;
        const char *text;
    } assets[] = {
        { "uPlot.min.css", bf_web_uPlot_min_css },
        { "uPlot.iife.min.js", bf_web_uPlot_iife_min_js },
        { "report.css", bf_web_report_css },
        { "report.js", bf_web_report_js },
        { "dashboard.css", bf_web_dashboard_css },
        { "dashboard.js", bf_web_dashboard_js },
    };
    if (len == 4 && strncmp(name, "data", 4) == 0)
        return json_dump_callback(data, write_script_json, out,
                                  JSON_COMPACT | JSON_REAL_PRECISION(6));
    for (size_t i = 0; i < sizeof assets / sizeof *assets; i++)
        if (strlen(assets[i].name) == len
            && strncmp(assets[i].name, name, len) == 0) {
            fputs(assets[i].text, out);
            return 0;
        }
    fprintf(stderr, "bifocal: page template names no asset '%.*s'\n",
            (int)len, name);
    return -1;
}

int bf_web_page_write(FILE *out, const char *template, const json_t *data)
{
    const char *p = template;
    for (;;) {
        const char *open = strstr(p, "/*@");
        const char *close = open ? strstr(open, "@*/") : NULL;
        if (!close) {
            fputs(p, out);
            break;
        }
        fwrite(p, 1, (size_t)(open - p), out);
        if (write_asset(out, open + 3, (size_t)(close - open - 3), data))
            return -1;
        p = close + 3;
    }
    return ferror(out) ? -1 : 0;
}
