/* file: reading a whole file, which the sweep and job loaders, the client
 * and the tests all need, and the one way any Bifocal program replaces a
 * file (checkpoints, their `latest` pointer, the daemon's port file): so
 * that a reader or a crash never sees one half-written. */
#ifndef BF_FILE_H
#define BF_FILE_H

#include <stddef.h>
#include <stdio.h>

#include "bf_error.h"

/* The contents of path, NUL-terminated (caller frees); *len (may be NULL)
 * gets the byte count without the NUL.  NULL with err naming the file and
 * the reason when it cannot be opened or read. */
char *bf_read_file(const char *path, size_t *len, bf_error *err);

/* Atomic replacement: writes go to a temporary file in the destination's
 * directory (so the rename cannot cross file systems); commit flushes and
 * fsyncs it, renames it over `path` and fsyncs the directory, since a
 * rename is durable only once the directory entry is on disk.  A crash
 * leaves either the old file or the new one, never a mix. */
typedef struct bf_atomic_file {
    /* private */
    FILE *fp;
    char path[1024];
    char tmp_path[1040];
} bf_atomic_file;

int bf_atomic_open(bf_atomic_file *f, const char *path, bf_error *err);
int bf_atomic_write(bf_atomic_file *f, const void *buf, size_t n,
                    bf_error *err);
/* On failure the temporary file is removed and `path` is untouched. */
int bf_atomic_commit(bf_atomic_file *f, bf_error *err);
/* Drops an uncommitted file (no-op after commit). */
void bf_atomic_abort(bf_atomic_file *f);

/* Replaces path with the n bytes of buf in one go (open, write, commit).
 * Returns 0, or -1 with err naming the file and the reason. */
int bf_write_file_atomic(const char *path, const void *buf, size_t n,
                         bf_error *err);

#endif
