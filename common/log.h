/* log: one line per event on stderr, e.g.
 *   2026-01-30T12:00:00.123Z INFO  lease job=3 attempt=7 worker=w1
 * Lines below the current level are dropped.  Not thread-safe in the sense
 * of ordering, but each line is written with a single write(2). */
#ifndef BF_LOG_H
#define BF_LOG_H

typedef enum {
    BF_LOG_DEBUG,
    BF_LOG_INFO,
    BF_LOG_WARN,
    BF_LOG_ERROR
} bf_log_level;

void bf_log_set_level(bf_log_level level);
/* "debug", "info", "warn", "error" -> level; -1 on anything else. */
int bf_log_level_from_name(const char *name);

/* Whether a line of this level would be written. */
int bf_log_enabled(bf_log_level level);

/* Writes one line.  Control characters in it (a newline, an escape
 * sequence) are written escaped (\n, \x1b): a line quotes what peers send
 * (a message type, a worker name), and a peer must not forge lines. */
void bf_log(bf_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define bf_log_debug(...) bf_log(BF_LOG_DEBUG, __VA_ARGS__)
#define bf_log_info(...)  bf_log(BF_LOG_INFO, __VA_ARGS__)
#define bf_log_warn(...)  bf_log(BF_LOG_WARN, __VA_ARGS__)
#define bf_log_error(...) bf_log(BF_LOG_ERROR, __VA_ARGS__)

#endif
