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

void bf_log(bf_log_level level, const char *fmt, ...)
{
    if (level < current_level)
        return;
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);

    char line[2048];
    size_t n = strftime(line, sizeof line, "%Y-%m-%dT%H:%M:%S", &tm);
    n += (size_t)snprintf(line + n, sizeof line - n, ".%03dZ %s ",
                          (int)(tv.tv_usec / 1000), level_tags[level]);
    va_list ap;
    va_start(ap, fmt);
    int body = vsnprintf(line + n, sizeof line - n - 1, fmt, ap);
    va_end(ap);
    /* A truncated line still ends with its newline. */
    n = body < 0 ? n : n + (size_t)body;
    if (n > sizeof line - 2)
        n = sizeof line - 2;
    line[n++] = '\n';
    /* One write per line so lines from several processes never interleave. */
    ssize_t w = write(STDERR_FILENO, line, n);
    (void)w;
}
