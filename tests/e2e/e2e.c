#include "e2e.h"

#include <dirent.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "clock.h"
#include "file.h"

#define MAX_GROUPS 16

static pid_t groups[MAX_GROUPS];   /* started and not yet reaped */
static bft_daemon fixture_daemon;

static void forget_group(pid_t pid)
{
    for (int i = 0; i < MAX_GROUPS; i++)
        if (groups[i] == pid)
            groups[i] = 0;
}

int e2e_setup(void **state)
{
    memset(&fixture_daemon, 0, sizeof fixture_daemon);
    *state = &fixture_daemon;
    return 0;
}

int e2e_teardown(void **state)
{
    for (int i = 0; i < MAX_GROUPS; i++)
        if (groups[i])
            e2e_group_kill(groups[i]);
    bft_daemon_cleanup(*state);
    return 0;
}

/* Forks argv (from the environment variable env's program) in its own
 * process group, output appended to log, and keeps it for the teardown. */
static pid_t start_logged(const char *env, const char **argv, const char *log)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        setpgid(0, 0);   /* kill(-pid) reaches mpirun and its ranks */
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, STDOUT_FILENO);
            dup2(fd, STDERR_FILENO);
        }
        execv(bft_env_path(env), (char *const *)argv);
        _exit(127);
    }
    setpgid(pid, pid);
    for (int i = 0; i < MAX_GROUPS; i++)
        if (!groups[i]) {
            groups[i] = pid;
            break;
        }
    return pid;
}

/* Appends the NULL-terminated arguments of ap after argv[argc] (of 40). */
static void end_args(const char **argv, int argc, va_list ap)
{
    for (const char *a = va_arg(ap, const char *); a && argc < 39;
         a = va_arg(ap, const char *))
        argv[argc++] = a;
    argv[argc] = NULL;
}

pid_t e2e_group_start(const bft_daemon *d, int np, const char *tag, ...)
{
    char nps[16], ckpt[400], log[400];
    snprintf(nps, sizeof nps, "%d", np);
    snprintf(ckpt, sizeof ckpt, "%s/ck", d->dir);
    snprintf(log, sizeof log, "%s/%s.log", d->dir, tag);
    const char *argv[40];
    int argc = 0;
    argv[argc++] = "mpirun";
    argv[argc++] = "--oversubscribe";
    argv[argc++] = "--bind-to";
    argv[argc++] = "none";
    argv[argc++] = "-np";
    argv[argc++] = nps;
    argv[argc++] = bft_env_path("BIFOCAL_WORKER");
    argv[argc++] = "--server";
    argv[argc++] = d->addr;
    argv[argc++] = "--token-file";
    argv[argc++] = d->token_file;
    argv[argc++] = "--checkpoint-dir";
    argv[argc++] = ckpt;
    argv[argc++] = "--name";
    argv[argc++] = tag;
    va_list ap;
    va_start(ap, tag);
    end_args(argv, argc, ap);
    va_end(ap);
    return start_logged("MPIRUN", argv, log);
}

pid_t e2e_exec_start(const bft_daemon *d, const char *tag, ...)
{
    char work[400], log[400];
    snprintf(work, sizeof work, "%s/exec", d->dir);
    snprintf(log, sizeof log, "%s/%s.log", d->dir, tag);
    const char *argv[40] = { "bifocal-worker", "--server", d->addr,
                             "--token-file", d->token_file, "--name", tag,
                             "--work-dir", work };
    int argc = 9;
    va_list ap;
    va_start(ap, tag);
    end_args(argv, argc, ap);
    va_end(ap);
    setenv("BIFOCAL_TOKEN_FILE", d->token_file, 1);
    return start_logged("BIFOCAL_WORKER", argv, log);
}

int e2e_group_wait(pid_t pid, int timeout_ms)
{
    long long deadline = bf_monotonic_ms() + timeout_ms;
    int status;
    while (waitpid(pid, &status, WNOHANG) == 0) {
        if (bf_monotonic_ms() > deadline) {
            fprintf(stderr, "e2e: group %d still running after %d ms\n",
                    (int)pid, timeout_ms);
            e2e_group_kill(pid);
            return -1;
        }
        bf_sleep_ms(20);
    }
    forget_group(pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Open MPI puts every rank in a process group of its own, so the ranks
 * are found as mpirun's children. */
static void kill_children(pid_t parent)
{
    DIR *proc = opendir("/proc");
    struct dirent *de;
    while (proc && (de = readdir(proc)) != NULL) {
        char path[300], comm[64];
        int pid = atoi(de->d_name), ppid = 0;
        if (pid <= 0)
            continue;
        snprintf(path, sizeof path, "/proc/%d/stat", pid);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        if (fscanf(f, "%*d (%63[^)]) %*c %d", comm, &ppid) == 2 &&
            ppid == parent)
            kill(pid, SIGKILL);
        fclose(f);
    }
    if (proc)
        closedir(proc);
}

void e2e_group_kill(pid_t pid)
{
    kill_children(pid);
    kill(-pid, SIGKILL);
    waitpid(pid, NULL, 0);
    forget_group(pid);
}

long long e2e_wait_sql(bft_daemon *d, const char *sql, long long at_least,
                       int timeout_ms)
{
    long long deadline = bf_monotonic_ms() + timeout_ms, v;
    while ((v = bft_sql_int(d, sql)) < at_least && bf_monotonic_ms() < deadline)
        bf_sleep_ms(20);
    return v;
}

int e2e_log_contains(const bft_daemon *d, const char *tag, const char *text)
{
    char path[400];
    snprintf(path, sizeof path, "%s/%s.log", d->dir, tag);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[4096];
    int found = 0;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, text) != NULL;
    fclose(f);
    return found;
}

int e2e_scheduled(int steps, int every)
{
    int n = 0;
    for (int s = 1; s <= steps; s++)
        n += s == steps || (every > 0 && s % every == 0);
    return n;
}

json_t *e2e_report_json(bft_daemon *d, const char *sweep)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/report.json", d->dir);
    if (bft_run_client(d, NULL, NULL, "report", sweep, "--json", "-o", path,
                       NULL) != 0)
        return NULL;
    json_error_t jerr;
    return json_load_file(path, 0, &jerr);
}

void e2e_sql_text(const bft_daemon *d, const char *sql, char *buf, size_t cap)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    buf[0] = '\0';
    if (sqlite3_open_v2(d->db, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK
        || sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        fprintf(stderr, "e2e: %s: %s\n", sql, sqlite3_errmsg(db));
    else if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
        snprintf(buf, cap, "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    sqlite3_close(db);
}

char *e2e_example(const char *name)
{
    const char *root = getenv("BF_SOURCE_ROOT");
    char path[1024];
    snprintf(path, sizeof path, "%s/configs/%s", root ? root : ".", name);
    bf_error err;
    char *text = bf_read_file(path, NULL, &err);
    if (!text)
        fail_msg("cannot read the example %s: %s", path, err.msg);
    return text;
}
