/* bf_error: the one way errors travel in Bifocal.
 *
 * Every function that can fail on user input takes a `bf_error *` (which may
 * be NULL) and fills it with a message that names what is wrong and where:
 * the file, the line (1-based, 0 = unknown) and the field.  The message is
 * complete on its own; `file`, `line` and `field` are there so that callers
 * (the coordinator's protocol replies, tests) can use them separately.
 * Callers own the struct; nothing in it is heap-allocated. */
#ifndef BF_ERROR_H
#define BF_ERROR_H

#include <stdarg.h>

typedef struct bf_error {
    char msg[1024];   /* full human-readable message, includes where */
    char file[256];   /* source file or "" */
    char field[128];  /* offending field (dotted path) or "" */
    int line;         /* 1-based line in `file`, 0 when unknown */
} bf_error;

/* Formats `fmt` into err->msg, prefixed with "file:line: field: " for the
 * parts that are set.  Safe to call with err == NULL (no-op).  Returns -1 so
 * that `return bf_error_set(...)` reads naturally. */
int bf_error_set(bf_error *err, const char *file, int line, const char *field,
                 const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* The message of e without the "file:line: field 'x': " prefix that
 * bf_error_set put in front, so a caller can say it again from where the
 * value was written. */
const char *bf_error_body(const bf_error *e);

/* Clears err (no-op for NULL). */
void bf_error_clear(bf_error *err);

#endif
