#include "bf_error.h"

#include <stdio.h>
#include <string.h>

static void copy_str(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src ? src : "");
}

int bf_error_set(bf_error *err, const char *file, int line, const char *field,
                 const char *fmt, ...)
{
    if (!err)
        return -1;
    copy_str(err->file, sizeof err->file, file);
    copy_str(err->field, sizeof err->field, field);
    err->line = line;

    char prefix[512] = "";
    size_t n = 0;
    if (file && *file)
        n += (size_t)snprintf(prefix + n, sizeof prefix - n, "%s:", file);
    if (line > 0 && n < sizeof prefix)
        n += (size_t)snprintf(prefix + n, sizeof prefix - n, "%d:", line);
    if (n > 0 && n < sizeof prefix)
        n += (size_t)snprintf(prefix + n, sizeof prefix - n, " ");
    if (field && *field && n < sizeof prefix)
        snprintf(prefix + n, sizeof prefix - n, "field '%s': ", field);

    char body[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof body, fmt, ap);
    va_end(ap);
    snprintf(err->msg, sizeof err->msg, "%s%s", prefix, body);
    return -1;
}

const char *bf_error_body(const bf_error *e)
{
    bf_error prefix;
    bf_error_set(&prefix, e->file, e->line, e->field, "%s", "");
    size_t n = strlen(prefix.msg);
    return strncmp(e->msg, prefix.msg, n) == 0 ? e->msg + n : e->msg;
}

void bf_error_clear(bf_error *err)
{
    if (err)
        memset(err, 0, sizeof *err);
}
