#include "file.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"

char *bf_read_file(const char *path, size_t *len, bf_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        bf_error_set(err, path, 0, NULL, "cannot open file: %s",
                     strerror(errno));
        return NULL;
    }
    size_t n = 0, cap = 4096;
    char *text = bf_xmalloc(cap + 1);
    for (;;) {
        n += fread(text + n, 1, cap - n, f);
        if (n < cap)
            break;
        text = bf_xrealloc(text, 2 * cap + 1);
        cap *= 2;
    }
    int read_failed = ferror(f);
    fclose(f);
    if (read_failed) {
        bf_error_set(err, path, 0, NULL, "cannot read file: I/O error");
        free(text);
        return NULL;
    }
    text[n] = '\0';
    if (len)
        *len = n;
    return text;
}

int bf_atomic_open(bf_atomic_file *f, const char *path, bf_error *err)
{
    memset(f, 0, sizeof *f);
    if (strlen(path) >= sizeof f->path)
        return bf_error_set(err, path, 0, NULL, "path too long");
    snprintf(f->path, sizeof f->path, "%s", path);
    snprintf(f->tmp_path, sizeof f->tmp_path, "%s.tmp.%ld", path,
             (long)getpid());
    f->fp = fopen(f->tmp_path, "wb");
    if (!f->fp)
        return bf_error_set(err, f->tmp_path, 0, NULL, "cannot create: %s",
                            strerror(errno));
    return 0;
}

int bf_atomic_write(bf_atomic_file *f, const void *buf, size_t n,
                    bf_error *err)
{
    if (n > 0 && fwrite(buf, 1, n, f->fp) != n)
        return bf_error_set(err, f->tmp_path, 0, NULL, "write failed: %s",
                            strerror(errno));
    return 0;
}

/* A rename is only durable once the directory entry itself is on disk. */
static int fsync_parent_dir(const char *path, bf_error *err)
{
    char copy[1024];
    snprintf(copy, sizeof copy, "%s", path);
    const char *dir = dirname(copy);
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        return bf_error_set(err, dir, 0, NULL, "cannot open directory: %s",
                            strerror(errno));
    int rc = fsync(fd);
    close(fd);
    if (rc != 0)
        return bf_error_set(err, dir, 0, NULL, "fsync failed: %s",
                            strerror(errno));
    return 0;
}

int bf_atomic_commit(bf_atomic_file *f, bf_error *err)
{
    int ok = fflush(f->fp) == 0 && fsync(fileno(f->fp)) == 0;
    int saved = errno;
    ok = (fclose(f->fp) == 0) && ok;
    f->fp = NULL;
    if (!ok) {
        unlink(f->tmp_path);
        return bf_error_set(err, f->tmp_path, 0, NULL, "flush failed: %s",
                            strerror(saved ? saved : errno));
    }
    if (rename(f->tmp_path, f->path) != 0) {
        saved = errno;
        unlink(f->tmp_path);
        return bf_error_set(err, f->path, 0, NULL, "rename failed: %s",
                            strerror(saved));
    }
    return fsync_parent_dir(f->path, err);
}

void bf_atomic_abort(bf_atomic_file *f)
{
    if (!f->fp)
        return;
    fclose(f->fp);
    f->fp = NULL;
    unlink(f->tmp_path);
}

int bf_write_file_atomic(const char *path, const void *buf, size_t n,
                         bf_error *err)
{
    bf_atomic_file f;
    if (bf_atomic_open(&f, path, err) != 0)
        return -1;
    if (bf_atomic_write(&f, buf, n, err) != 0) {
        bf_atomic_abort(&f);
        return -1;
    }
    return bf_atomic_commit(&f, err);
}
