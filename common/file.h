/* file: reading a whole file, which the sweep and job loaders, the client
 * and the tests all need. */
#ifndef BF_FILE_H
#define BF_FILE_H

#include <stddef.h>

#include "bf_error.h"

/* The contents of path, NUL-terminated (caller frees); *len (may be NULL)
 * gets the byte count without the NUL.  NULL with err naming the file and
 * the reason when it cannot be opened or read. */
char *bf_read_file(const char *path, size_t *len, bf_error *err);

#endif
