/* bifocald: the coordinator daemon.  Parses options, makes sure a token
 * exists, and runs the loop of daemon.c. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "daemon.h"
#include "log.h"

static const char usage[] =
    "usage: bifocald [--db FILE] [--listen HOST:PORT] [--token-file FILE]\n"
    "                [--port-file FILE] [--lease-seconds N]\n"
    "                [--log-level debug|info|warn|error]\n"
    "\n"
    "  --db FILE          SQLite database (default ./bifocal.db)\n"
    "  --listen HOST:PORT address to serve (default 127.0.0.1:7070;\n"
    "                     port 0 picks a free port)\n"
    "  --token-file FILE  shared secret every connection must present\n"
    "                     (default DB.token, created with mode 0600)\n"
    "  --port-file FILE   write the bound port here once listening\n"
    "  --lease-seconds N  a job lease lasts N s unless renewed (default 30)\n"
    "  --log-level LEVEL  least severe event logged (default info)\n";

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

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "db", required_argument, NULL, 'd' },
        { "listen", required_argument, NULL, 'l' },
        { "token-file", required_argument, NULL, 't' },
        { "port-file", required_argument, NULL, 'p' },
        { "lease-seconds", required_argument, NULL, 's' },
        { "log-level", required_argument, NULL, 'v' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    bf_daemon_options o = { .db_path = "./bifocal.db",
                            .listen = "127.0.0.1:7070",
                            .lease_seconds = 30 };
    const char *token_file = NULL;
    int opt, level;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'd': o.db_path = optarg; break;
        case 'l': o.listen = optarg; break;
        case 't': token_file = optarg; break;
        case 'p': o.port_file = optarg; break;
        case 's':
            if (bf_parse_int_arg(optarg, 1, 7 * 24 * 3600,
                                 &o.lease_seconds)) {
                fprintf(stderr, "bifocald: --lease-seconds: '%s' is not a "
                        "number of seconds from 1 to 604800\n", optarg);
                return 2;
            }
            break;
        case 'v':
            level = bf_log_level_from_name(optarg);
            if (level < 0) {
                fprintf(stderr, "bifocald: --log-level: '%s' is not one of "
                        "debug, info, warn, error\n", optarg);
                return 2;
            }
            bf_log_set_level((bf_log_level)level);
            break;
        case 'h': fputs(usage, stdout); return 0;
        default: fputs(usage, stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "bifocald: unexpected argument '%s'\n%s", argv[optind],
                usage);
        return 2;
    }

    char default_token_file[PATH_MAX];
    if (!token_file) {
        snprintf(default_token_file, sizeof default_token_file, "%s.token",
                 o.db_path);
        token_file = default_token_file;
    }
    char token[BF_TOKEN_HEX_LEN + 1];
    bf_error err;
    bf_error_clear(&err);
    if (load_or_create_token(token_file, token, sizeof token, &err)) {
        bf_log_error("%s", err.msg);
        return 1;
    }
    o.token = token;

    /* Every request allocates and frees (JSON, SQLite statements); with
     * glibc's default trim threshold the heap top is returned to the kernel
     * and faulted back in on almost every request, which doubled the CPU
     * cost of a lease in bench_dispatch.  Keep up to 64 MiB of free heap. */
    mallopt(M_TRIM_THRESHOLD, 64 << 20);
    mallopt(M_TOP_PAD, 16 << 20);
    /* A peer that vanishes mid-write must cost an error code, not the
     * process. */
    signal(SIGPIPE, SIG_IGN);
    bf_daemon d;
    if (bf_daemon_init(&d, uv_default_loop(), &o, &err)) {
        bf_log_error("%s", err.msg);
        return 1;
    }
    int rc = bf_daemon_run(&d);
    uv_loop_close(uv_default_loop());
    return rc;
}
