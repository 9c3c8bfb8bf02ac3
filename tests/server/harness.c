#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"

const char *bft_env_path(const char *env)
{
    const char *p = getenv(env);
    if (!p || !*p) {
        fprintf(stderr, "harness: environment variable %s is not set\n", env);
        exit(2);
    }
    return p;
}

/* Starts bifocald on d's database, listening on listen, and waits until it
 * has written its port file. */
static int spawn_daemon(bft_daemon *d, const char *listen)
{
    unlink(d->port_file);
    char lease[16];
    snprintf(lease, sizeof lease, "%d", d->lease_seconds);
    const char *log_level = getenv("BFT_DAEMON_LOG_LEVEL");
    if (!log_level)
        log_level = "debug";
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        /* A test that fails an assertion leaves without stopping it: the
         * daemon goes with it rather than hold the test's output open. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int fd = open(d->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0)
            dup2(fd, STDERR_FILENO);
        const char *argv[32] = { "bifocald", "--db", d->db, "--listen",
            listen, "--port-file", d->port_file, "--lease-seconds", lease,
            "--log-level", log_level };
        int argc = 11;
        for (int i = 0; d->extra_args[i] && argc < 31; i++)
            argv[argc++] = d->extra_args[i];
        execv(bft_env_path("BIFOCALD"), (char *const *)argv);
        _exit(127);
    }
    d->pid = pid;
    /* The port file appears (atomically) once the daemon listens. */
    for (int i = 0; i < 2000; i++) {
        FILE *f = fopen(d->port_file, "r");
        int port = 0;
        if (f) {
            int ok = fscanf(f, "%d", &port) == 1;
            fclose(f);
            if (ok && port > 0) {
                snprintf(d->addr, sizeof d->addr, "127.0.0.1:%d", port);
                bf_error err;
                return bf_wire_read_token(d->token_file, d->token,
                                          sizeof d->token, &err);
            }
        }
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            d->pid = 0;
            fprintf(stderr, "harness: bifocald exited early (see %s)\n",
                    d->log);
            return -1;
        }
        bf_sleep_ms(5);
    }
    fprintf(stderr, "harness: bifocald did not start\n");
    return -1;
}

int bft_daemon_restart(bft_daemon *d)
{
    return spawn_daemon(d, "127.0.0.1:0");
}

int bft_daemon_restart_same_port(bft_daemon *d)
{
    return spawn_daemon(d, d->addr);
}

/* A fresh directory for d's files; nothing started yet. */
static int prepare(bft_daemon *d, int lease_seconds)
{
    memset(d, 0, sizeof *d);
    snprintf(d->dir, sizeof d->dir, "/tmp/bifocal-test-XXXXXX");
    if (!mkdtemp(d->dir))
        return -1;
    snprintf(d->db, sizeof d->db, "%s/bifocal.db", d->dir);
    snprintf(d->token_file, sizeof d->token_file, "%s/bifocal.db.token",
             d->dir);
    snprintf(d->port_file, sizeof d->port_file, "%s/port", d->dir);
    snprintf(d->log, sizeof d->log, "%s/daemon.log", d->dir);
    d->lease_seconds = lease_seconds;
    return 0;
}

int bft_daemon_start(bft_daemon *d, int lease_seconds)
{
    return prepare(d, lease_seconds) ? -1 : bft_daemon_restart(d);
}

int bft_daemon_start_with(bft_daemon *d, int lease_seconds, ...)
{
    if (prepare(d, lease_seconds))
        return -1;
    int n = 0;
    va_list ap;
    va_start(ap, lease_seconds);
    for (const char *a; (a = va_arg(ap, const char *)) && n < 15;)
        d->extra_args[n++] = a;
    va_end(ap);
    return bft_daemon_restart(d);
}

static int setup_daemon(void **state, int lease_seconds)
{
    bft_daemon *d = calloc(1, sizeof *d);
    if (bft_daemon_start(d, lease_seconds)) {
        free(d);
        return -1;
    }
    *state = d;
    return 0;
}

int bft_daemon_setup(void **state) { return setup_daemon(state, 30); }

int bft_daemon_setup_short_lease(void **state)
{
    return setup_daemon(state, 1);
}

int bft_daemon_teardown(void **state)
{
    bft_daemon *d = *state;
    /* Every test leaves a daemon that still stops cleanly. */
    int rc = bft_stop_and_clean(d);
    free(d);
    return rc == 0 ? 0 : -1;
}

int bft_daemon_stop(bft_daemon *d, int sig)
{
    if (!d->pid)
        return -1;
    kill(d->pid, sig);
    int status = 0;
    waitpid(d->pid, &status, 0);
    d->pid = 0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

double bft_daemon_cpu_seconds(const bft_daemon *d)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)d->pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char buf[1024];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* Fields after the command name, which is in parentheses and may hold
     * spaces: state is field 3, utime 14, stime 15. */
    char *p = strrchr(buf, ')');
    unsigned long long utime, stime;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
                     "%llu %llu", &utime, &stime) != 2)
        return -1;
    return (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
}

int bft_stop_and_clean(bft_daemon *d)
{
    int status = bft_daemon_stop(d, SIGTERM);
    bft_daemon_cleanup(d);
    return status;
}

void bft_close_all(bf_rpc *c, int n)
{
    for (int i = 0; i < n; i++)
        bf_rpc_close(&c[i]);
}

long bft_proc_status_kib(pid_t pid, const char *field)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    size_t len = strlen(field);
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, field, len) == 0 && line[len] == ':')
            kib = atol(line + len + 1);
    if (f)
        fclose(f);
    return kib;
}

static int remove_entry(const char *path, const struct stat *st, int flag,
                        struct FTW *ftw)
{
    (void)st; (void)flag; (void)ftw;
    return remove(path);
}

void bft_daemon_cleanup(bft_daemon *d)
{
    if (d->pid)
        bft_daemon_stop(d, SIGKILL);
    if (d->dir[0] && !getenv("BFT_KEEP"))
        nftw(d->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int bft_connect(bft_daemon *d, bf_rpc *c, const char *role,
                const char *name)
{
    bf_error err;
    if (bf_rpc_connect(c, d->addr, &err)) {
        fprintf(stderr, "harness: %s\n", err.msg);
        return -1;
    }
    if (role && bf_rpc_hello(c, d->token, role, name, "testhost", 1, &err)) {
        fprintf(stderr, "harness: hello: %s\n", err.msg);
        bf_rpc_close(c);
        return -1;
    }
    return 0;
}

int bft_connect_from(bft_daemon *d, bf_rpc *c, const char *src_ip)
{
    memset(c, 0, sizeof *c);
    c->fd = -1;
    c->next_id = 1;
    int port = atoi(strrchr(d->addr, ':') + 1);
    struct sockaddr_in src = { .sin_family = AF_INET };
    struct sockaddr_in dst = { .sin_family = AF_INET,
                               .sin_port = htons((uint16_t)port) };
    if (inet_pton(AF_INET, src_ip, &src.sin_addr) != 1
        || inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr) != 1)
        return -1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (bind(fd, (struct sockaddr *)&src, sizeof src) != 0
        || connect(fd, (struct sockaddr *)&dst, sizeof dst) != 0) {
        fprintf(stderr, "harness: connect from %s: %s\n", src_ip,
                strerror(errno));
        close(fd);
        return -1;
    }
    c->fd = fd;
    bf_frame_reader_init(&c->rd, BF_WIRE_MAX_FRAME);
    return 0;
}

json_t *bft_request(bf_rpc *c, json_t *msg)
{
    bf_error err;
    /* Only a guard against a hang: a big submission under ASan on a
     * loaded machine takes many seconds, and that is no failure. */
    json_t *reply = bf_rpc_request(c, msg, 120000, NULL, NULL, &err);
    json_decref(msg);
    return reply;
}

int bft_reply_is(json_t *r, const char *type)
{
    int ok = r && strcmp(bf_wire_type(r), type) == 0;
    if (!ok) {
        char *text = r ? json_dumps(r, JSON_COMPACT) : NULL;
        fprintf(stderr, "expected a '%s' reply, got %s\n", type,
                text ? text : "none");
        free(text);
    }
    json_decref(r);
    return ok;
}

int bft_serves_status(bft_daemon *d)
{
    bf_rpc c;
    if (bft_connect(d, &c, "client", NULL) != 0)
        return 0;
    json_t *r = bft_request(&c, json_pack("{s:s}", "type", "status"));
    int ok = r && strcmp(bf_wire_type(r), "status") == 0
             && json_is_array(json_object_get(r, "sweeps"));
    json_decref(r);
    bf_rpc_close(&c);
    return ok;
}

void bft_send_hello(bf_rpc *c, const char *token)
{
    json_t *m = json_pack("{s:s, s:i, s:s, s:s}", "type", "hello", "version",
                          BF_WIRE_VERSION, "token", token, "role", "client");
    bf_error err;
    if (bf_rpc_send(c, m, &err) != 0)
        fprintf(stderr, "harness: sending a hello: %s\n", err.msg);
    json_decref(m);
}

int bft_hello_from(bft_daemon *d, const char *src_ip, const char *token,
                   int wait_ms, char *code)
{
    bf_rpc c;
    code[0] = '\0';
    if (bft_connect_from(d, &c, src_ip) != 0)
        return 0;
    bft_send_hello(&c, token);
    bf_error err;
    json_t *r = bf_rpc_recv(&c, wait_ms, &err);
    int ok = r && strcmp(bf_wire_type(r), "ack") == 0;
    const char *got = json_string_value(json_object_get(r, "code"));
    snprintf(code, 32, "%s", got ? got : "");
    if (!r)
        fprintf(stderr, "harness: hello from %s: %s\n", src_ip, err.msg);
    json_decref(r);
    bf_rpc_close(&c);
    return ok;
}

int bft_file_lines_with(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof line, f))
        n += strstr(line, needle) != NULL;
    fclose(f);
    return n;
}

int bft_log_lines_with(bft_daemon *d, const char *needle)
{
    return bft_file_lines_with(d->log, needle);
}

long bft_file_number_after(const char *path, const char *prefix)
{
    FILE *f = fopen(path, "r");
    char line[4096];
    long number = -1;
    while (f && fgets(line, sizeof line, f)) {
        const char *p = strstr(line, prefix);
        if (p)
            number = atol(p + strlen(prefix));
    }
    if (f)
        fclose(f);
    return number;
}

int bft_refused_with(bf_rpc *c, const char *code)
{
    bf_error err;
    json_t *m = bf_rpc_recv(c, 5000, &err);
    const char *got = m && strcmp(bf_wire_type(m), "error") == 0
        ? json_string_value(json_object_get(m, "code")) : NULL;
    int ok = got && strcmp(got, code) == 0;
    if (!ok) {
        char *text = m ? json_dumps(m, JSON_COMPACT) : NULL;
        fprintf(stderr, "expected error '%s', got %s\n", code,
                text ? text : err.msg);
        free(text);
    }
    json_decref(m);
    if (!ok)
        return 0;
    json_t *after = bf_rpc_recv(c, 5000, &err);
    if (after || !strstr(err.msg, "closed")) {
        fprintf(stderr, "expected the connection closed after '%s': %s\n",
                code, after ? bf_wire_type(after) : err.msg);
        json_decref(after);
        return 0;
    }
    return 1;
}

int bft_send_raw(bf_rpc *c, const char *bytes, size_t n)
{
    size_t off = 0;
    while (off < n) {
        ssize_t w = send(c->fd, bytes + off, n - off, MSG_NOSIGNAL);
        if (w <= 0)
            return -1;
        off += (size_t)w;
    }
    return 0;
}

int64_t bft_submit(bft_daemon *d, const char *filename, const char *yaml,
                   int *n_jobs, json_t **error_out)
{
    bf_rpc c;
    if (bft_connect(d, &c, "client", NULL))
        return -1;
    json_t *reply = bft_request(&c, json_pack("{s:s, s:s, s:s}", "type",
                                "submit", "filename", filename, "text", yaml));
    bf_rpc_close(&c);
    if (!reply)
        return -1;
    int64_t id = -1;
    if (strcmp(bf_wire_type(reply), "ack") == 0) {
        id = json_integer_value(json_object_get(reply, "sweep_id"));
        if (n_jobs)
            *n_jobs = (int)json_integer_value(json_object_get(reply, "jobs"));
    } else if (error_out) {
        *error_out = json_incref(reply);
    }
    json_decref(reply);
    return id;
}

long long bft_db_int(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    long long v = -1;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        fprintf(stderr, "harness: %s: %s\n", sql, sqlite3_errmsg(db));
    else if (sqlite3_step(st) != SQLITE_ROW)
        fprintf(stderr, "harness: %s: no row (%s)\n", sql, sqlite3_errmsg(db));
    else
        v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

long long bft_sql_int(bft_daemon *d, const char *sql)
{
    char *out = NULL;
    int pipefd[2];
    if (pipe(pipefd))
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pipefd[1], STDOUT_FILENO);
        close(pipefd[0]);
        execlp("sqlite3", "sqlite3", "-batch", "-cmd", ".timeout 5000", d->db,
               sql, (char *)NULL);
        _exit(127);
    }
    close(pipefd[1]);
    FILE *f = fdopen(pipefd[0], "r");
    size_t cap = 0;
    long long v = -1;
    if (getline(&out, &cap, f) > 0)
        v = strtoll(out, NULL, 10);
    fclose(f);
    free(out);
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? v : -1;
}

static char *slurp_fd(int fd)
{
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    ssize_t r;
    while ((r = read(fd, buf + n, cap - n - 1)) > 0) {
        n += (size_t)r;
        if (cap - n < 2)
            buf = realloc(buf, cap *= 2);
    }
    buf[n] = '\0';
    close(fd);
    return buf;
}

int bft_run_client(bft_daemon *d, char **out, char **err, const char *arg,
                   ...)
{
    const char *argv[32];
    int argc = 0;
    argv[argc++] = "bifocal";
    argv[argc++] = "--server";
    argv[argc++] = d->addr;
    argv[argc++] = "--token-file";
    argv[argc++] = d->token_file;
    va_list ap;
    va_start(ap, arg);
    for (const char *a = arg; a && argc < 31; a = va_arg(ap, const char *))
        argv[argc++] = a;
    va_end(ap);
    argv[argc] = NULL;

    /* Both outputs go to files: reading two pipes in turn could deadlock. */
    char out_path[400], err_path[400];
    snprintf(out_path, sizeof out_path, "%s/client.out", d->dir);
    snprintf(err_path, sizeof err_path, "%s/client.err", d->dir);
    pid_t pid = fork();
    if (pid == 0) {
        int o = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(o, STDOUT_FILENO);
        dup2(e, STDERR_FILENO);
        execv(bft_env_path("BIFOCAL"), (char *const *)argv);
        _exit(127);
    }
    int status;
    waitpid(pid, &status, 0);
    if (out)
        *out = slurp_fd(open(out_path, O_RDONLY));
    if (err)
        *err = slurp_fd(open(err_path, O_RDONLY));
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

const char *bft_write_file(bft_daemon *d, const char *name, const char *text)
{
    static char path[400];
    snprintf(path, sizeof path, "%s/%s", d->dir, name);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    return path;
}
