#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static bf_log_level current_level = BF_LOG_INFO;

static const char *const level_names[] = { "debug", "info", "warn", "error" };
static const char *const level_tags[] = { "DEBUG", "INFO ", "WARN ", "ERROR" };

void bf_log_set_level(bf_log_level level) { current_level = level; }

int bf_log_level_from_name(const char *name)
{
    for (int i = 0; i <= BF_LOG_ERROR; i++)
        if (name && strcmp(name, level_names[i]) == 0)
            return i;
    return -1;
}

int bf_log_enabled(bf_log_level level) { return level >= current_level; }

/* Copies body into out (cap bytes) with every control character
 * escaped; returns the bytes written, cut at a whole escape. */
static size_t escape_controls(char *out, size_t cap, const char *body)
{
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)body; *p; p++) {
        char esc[4];
        size_t k;
        if (*p >= 0x20 && *p != 0x7f) {
            esc[0] = (char)*p;
            k = 1;
        } else if (*p == '\n' || *p == '\r' || *p == '\t') {
            esc[0] = '\\';
            esc[1] = *p == '\n' ? 'n' : *p == '\r' ? 'r' : 't';
            k = 2;
        } else {
            static const char hex[] = "0123456789abcdef";
            esc[0] = '\\';
            esc[1] = 'x';
            esc[2] = hex[*p >> 4];
            esc[3] = hex[*p & 15];
            k = 4;
        }
        if (n + k > cap)
            break;
        memcpy(out + n, esc, k);
        n += k;
    }
    return n;
}

void bf_log(bf_log_level level, const char *fmt, ...)
{
    if (level < current_level)
        return;
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);

    char line[2048], body[2048];
    size_t n = strftime(line, sizeof line, "%Y-%m-%dT%H:%M:%S", &tm);
    n += (size_t)snprintf(line + n, sizeof line - n, ".%03dZ %s ",
                          (int)(tv.tv_usec / 1000), level_tags[level]);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof body, fmt, ap);
    va_end(ap);
    /* A truncated line still ends with its newline. */
    n += escape_controls(line + n, sizeof line - n - 1, body);
    line[n++] = '\n';
    /* One write per line so lines from several processes never interleave. */
    ssize_t w = write(STDERR_FILENO, line, n);
    (void)w;
}
