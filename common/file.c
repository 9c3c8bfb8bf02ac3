#include "file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *bf_read_file(const char *path, size_t *len, bf_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        bf_error_set(err, path, 0, NULL, "cannot open file: %s",
                     strerror(errno));
        return NULL;
    }
    size_t n = 0, cap = 4096;
    char *text = malloc(cap + 1);
    while (text) {
        n += fread(text + n, 1, cap - n, f);
        if (n < cap)
            break;
        char *bigger = realloc(text, 2 * cap + 1);
        if (!bigger)
            free(text);
        text = bigger;
        cap *= 2;
    }
    int read_failed = ferror(f);
    fclose(f);
    if (!text || read_failed) {
        bf_error_set(err, path, 0, NULL, "cannot read file: %s",
                     text ? "I/O error" : "out of memory");
        free(text);
        return NULL;
    }
    text[n] = '\0';
    if (len)
        *len = n;
    return text;
}
