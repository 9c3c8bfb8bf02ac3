/* bifocald: the coordinator daemon.  Parses options, makes sure a token
 * exists, and runs the loop of daemon.c. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "alloc.h"
#include "args.h"
#include "daemon.h"
#include "db_lock.h"
#include "log.h"

static const char usage[] =
    "usage: bifocald [--db FILE] [--listen HOST:PORT] [--token-file FILE]\n"
    "                [--port-file FILE] [--lease-seconds N]\n"
    "                [--log-level debug|info|warn|error] [limits]\n"
    "\n"
    "  --db FILE          SQLite database (default ./bifocal.db)\n"
    "  --listen HOST:PORT address to serve (default 127.0.0.1:7070;\n"
    "                     port 0 picks a free port)\n"
    "  --token-file FILE  shared secret every connection must present\n"
    "                     (default DB.token, created with mode 0600)\n"
    "  --port-file FILE   write the bound port here once listening\n"
    "  --lease-seconds N  a job lease lasts N s unless renewed (default 30)\n"
    "  --log-level LEVEL  least severe event logged (default info)\n"
    "\n"
    "limits on connections that have not said a good hello (strangers):\n"
    "  --hello-timeout-ms N         closed unless admitted within N ms\n"
    "                               (default 10000)\n"
    "  --max-strangers N            at most N at once; a newcomer closes\n"
    "                               the oldest (default 512)\n"
    "  --max-strangers-per-addr N   at most N at once from one address\n"
    "                               (an IPv6 /64) (default 64)\n"
    "  --hello-failures N           failed hellos of an address answered at\n"
    "                               once; each later one is answered late,\n"
    "                               1 s doubling to 8 s (default 10; 0: all\n"
    "                               at once). A good hello never waits\n"
    "  --max-protocol-errors N      close a connection after N protocol\n"
    "                               errors in a row (default 100; 0: never)\n";

/* Creates a token file of 32 random bytes as hex, readable by its owner
 * only.  O_EXCL: never overwrite a token another process just made. */
static int create_token(const char *path, bf_error *err)
{
    unsigned char raw[BF_TOKEN_HEX_LEN / 2];
    FILE *r = fopen("/dev/urandom", "rb");
    if (!r || fread(raw, 1, sizeof raw, r) != sizeof raw) {
        if (r)
            fclose(r);
        return bf_error_set(err, "/dev/urandom", 0, NULL,
                            "cannot read random bytes");
    }
    fclose(r);
    char hex[BF_TOKEN_HEX_LEN + 2];
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(hex + 2 * i, 3, "%02x", raw[i]);
    hex[BF_TOKEN_HEX_LEN] = '\n';
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return bf_error_set(err, path, 0, "token-file", "cannot create: %s",
                            strerror(errno));
    ssize_t w = write(fd, hex, BF_TOKEN_HEX_LEN + 1);
    close(fd);
    if (w != BF_TOKEN_HEX_LEN + 1)
        return bf_error_set(err, path, 0, "token-file", "short write");
    bf_log_info("created token file %s", path);
    return 0;
}

static int load_or_create_token(const char *path, char *token, size_t cap,
                                bf_error *err)
{
    if (access(path, F_OK) != 0 && create_token(path, err))
        return -1;
    return bf_wire_read_token(path, token, cap, err);
}

/* Fills o and *token_file from the command line.  Returns BF_ARGS_OK;
 * BF_ARGS_HELP after printing the usage; BF_ARGS_USAGE after saying what
 * is wrong. */
static int parse_options(int argc, char **argv, bf_daemon_options *o,
                         const char **token_file)
{
    const char *log_level = NULL;
    const bf_option options[] = {
        BF_OPT_STR("db", "FILE", &o->db_path),
        BF_OPT_STR("listen", "HOST:PORT", &o->listen),
        BF_OPT_STR("token-file", "FILE", token_file),
        BF_OPT_STR("port-file", "FILE", &o->port_file),
        BF_OPT_INT("lease-seconds", "N", &o->lease_seconds, 1, 7 * 24 * 3600),
        BF_OPT_STR("log-level", "LEVEL", &log_level),
        BF_OPT_INT("hello-timeout-ms", "N", &o->limits.hello_timeout_ms, 10,
                   3600 * 1000),
        BF_OPT_INT("max-strangers", "N", &o->limits.max_strangers, 1,
                   1000000),
        BF_OPT_INT("max-strangers-per-addr", "N",
                   &o->limits.max_strangers_per_addr, 1, 1000000),
        BF_OPT_INT("hello-failures", "N", &o->limits.hello_failures, 0,
                   1000000),
        BF_OPT_INT("max-protocol-errors", "N", &o->max_protocol_errors, 0,
                   1000000000),
        BF_OPT_END,
    };
    bf_args a = { .prog = "bifocald", .options = options };
    int rc = bf_args_parse(&a, argc, argv);
    if (rc == BF_ARGS_HELP) {
        fputs(usage, stdout);
        return BF_ARGS_HELP;
    }
    if (rc != BF_ARGS_OK)
        return rc;
    if (log_level) {
        int level = bf_log_level_from_name(log_level);
        if (level < 0) {
            fprintf(stderr, "bifocald: --log-level: '%s' is not one of "
                    "debug, info, warn, error\n", log_level);
            return BF_ARGS_USAGE;
        }
        bf_log_set_level((bf_log_level)level);
    }
    return BF_ARGS_OK;
}

/* The daemon's token, from --token-file or DB.token, made if missing. */
static int setup_token(const bf_daemon_options *o, const char *token_file,
                       char *token, size_t cap, bf_error *err)
{
    char default_token_file[PATH_MAX];
    if (!token_file) {
        snprintf(default_token_file, sizeof default_token_file, "%s.token",
                 o->db_path);
        token_file = default_token_file;
    }
    return load_or_create_token(token_file, token, cap, err);
}

/* Every connection is a descriptor: the soft limit (often 1,024) would
 * let a thousand idle peers lock everyone out, so it goes up to the hard
 * limit.  The strangers' caps keep peers without the token well below it. */
static void raise_descriptor_limit(void)
{
    struct rlimit lim;
    if (getrlimit(RLIMIT_NOFILE, &lim) != 0)
        return;
    rlim_t want = lim.rlim_max;
    if (lim.rlim_cur < want) {
        struct rlimit raised = { .rlim_cur = want, .rlim_max = lim.rlim_max };
        if (setrlimit(RLIMIT_NOFILE, &raised) == 0)
            lim.rlim_cur = want;
    }
    bf_log_info("open descriptors: at most %llu",
                (unsigned long long)lim.rlim_cur);
}

static void tune_process(void)
{
    raise_descriptor_limit();
    /* Every request allocates and frees (JSON, SQLite statements); with
     * glibc's default trim threshold the heap top is returned to the kernel
     * and faulted back in on almost every request, which doubled the CPU
     * cost of a lease in bench_dispatch.  Keep up to 64 MiB of free heap. */
    mallopt(M_TRIM_THRESHOLD, 64 << 20);
    mallopt(M_TOP_PAD, 16 << 20);
    /* A peer that vanishes mid-write must cost an error code, not the
     * process. */
    signal(SIGPIPE, SIG_IGN);
    /* A file-size limit (RLIMIT_FSIZE) reached by a write to the database
     * must be a failed write (EFBIG, a `store` error and a log line), not
     * a silent death. */
    signal(SIGXFSZ, SIG_IGN);
}

int main(int argc, char **argv)
{
    bf_alloc_init();
    bf_daemon_options o = { .db_path = "./bifocal.db",
                            .listen = "127.0.0.1:7070",
                            .lease_seconds = 30,
                            .limits = BF_NET_LIMITS_DEFAULT,
                            .max_protocol_errors = BF_PROTOCOL_MAX_ERRORS };
    const char *token_file = NULL;
    int rc = parse_options(argc, argv, &o, &token_file);
    if (rc != BF_ARGS_OK)
        return rc == BF_ARGS_HELP ? 0 : rc;
    char token[BF_TOKEN_HEX_LEN + 1];
    bf_error err;
    bf_error_clear(&err);
    if (setup_token(&o, token_file, token, sizeof token, &err)) {
        bf_log_error("%s", err.msg);
        return 1;
    }
    o.token = token;
    tune_process();
    /* Before the database is opened (and migrated): a second daemon on it
     * would expire the first one's leases. */
    int lock_fd = bf_db_lock_acquire(o.db_path, &err);
    if (lock_fd < 0) {
        bf_log_error("%s", err.msg);
        return 1;
    }
    o.lock_fd = lock_fd;
    bf_daemon d;
    if (bf_daemon_init(&d, uv_default_loop(), &o, &err)) {
        bf_log_error("%s", err.msg);
        return 1;
    }
#ifdef BF_ALLOC_INJECT
    bf_alloc_inject_arm();   /* the scenario's allocations, not start-up's */
#endif
    rc = bf_daemon_run(&d);
    uv_loop_close(uv_default_loop());
#ifdef BF_ALLOC_INJECT
    bf_log_info("allocations counted: %ld", bf_alloc_inject_count());
#endif
    return rc;
}
