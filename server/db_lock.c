#include "db_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "log.h"

static void write_description(int fd, const char *text)
{
    size_t n = strlen(text);
    /* Not fatal: only a second daemon's refusal message is poorer. */
    if (ftruncate(fd, 0) != 0 || pwrite(fd, text, n, 0) != (ssize_t)n)
        bf_log_warn("cannot write to the database lock file: %s",
                    strerror(errno));
}

void bf_db_lock_describe(int fd, const char *listen, int port)
{
    const char *colon = strrchr(listen, ':');
    char text[512];
    snprintf(text, sizeof text, "pid %ld, listening on %.*s:%d\n",
             (long)getpid(), colon ? (int)(colon - listen) : 0, listen, port);
    write_description(fd, text);
}

/* What the running daemon wrote into its lock file, without the newline. */
static void read_holder(int fd, char *out, size_t cap)
{
    ssize_t n = pread(fd, out, cap - 1, 0);
    out[n > 0 ? n : 0] = '\0';
    out[strcspn(out, "\n")] = '\0';
    if (!out[0])
        snprintf(out, cap, "that has not described itself yet");
}

int bf_db_lock_acquire(const char *db_path, bf_error *err)
{
    char path[PATH_MAX];
    if ((size_t)snprintf(path, sizeof path, "%s.lock", db_path) >= sizeof path)
        return bf_error_set(err, db_path, 0, "db", "path too long");
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return bf_error_set(err, path, 0, "db", "cannot open the lock file: "
                            "%s", strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        char holder[256];
        if (e == EWOULDBLOCK)
            read_holder(fd, holder, sizeof holder);
        close(fd);
        if (e == EWOULDBLOCK)
            return bf_error_set(err, path, 0, "db", "database %s is in use by "
                                "another bifocald (%s): stop it first",
                                db_path, holder);
        return bf_error_set(err, path, 0, "db", "cannot lock: %s",
                            strerror(e));
    }
    char text[64];
    snprintf(text, sizeof text, "pid %ld, starting\n", (long)getpid());
    write_description(fd, text);
    return fd;
}
