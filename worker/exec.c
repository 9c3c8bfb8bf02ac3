#include "exec.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "alloc.h"
#include "args.h"
#include "clock.h"
#include "job_config.h"
#include "link.h"
#include "log.h"
#include "records.h"
#include "wire.h"

enum { EXIT_RUNTIME = 1, EXIT_USAGE = 2 };

#define POLL_MS 20                /* how often an attempt is looked at */
#define DEFAULT_GRACE_S 10        /* SIGTERM .. SIGKILL of the tree */
#define MAX_RECORD_LINE (1 << 20) /* a longer line is refused */
#define STDERR_TAIL 600           /* bytes of stderr a failure carries */
#define MAX_TREE 4096             /* descendants tracked while stopping */
#define RECORDS_FILE "records.jsonl"   /* in the attempt's directory */

static const char usage_text[] =
    "usage: bifocal-worker --server HOST:PORT --token-file FILE\n"
    "           --exec 'CMD ARGS...' --trainer NAME [--gpus LIST]\n"
    "           [--work-dir DIR] [--grace S] [--name NAME] [--max-jobs N]\n"
    "           [--exit-when-idle [--idle-grace S]] [--log-level LEVEL]\n"
    "\n"
    "Leases the jobs whose config says `trainer: NAME` and runs CMD for\n"
    "each (split into words without a shell; docs/trainers.md).\n"
    "  --exec CMD            the trainer's command line\n"
    "  --trainer NAME        the trainer it is (a job config's trainer)\n"
    "  --gpus LIST           CUDA_VISIBLE_DEVICES for the trainer\n"
    "  --work-dir DIR        attempts in DIR/db-<id>/job-<id>/attempt-<id>/\n"
    "                        (default ./bifocal-exec)\n"
    "  --grace S             SIGTERM to SIGKILL of a stopped trainer's\n"
    "                        processes (default 10)\n"
    "  --name NAME           worker name (default HOST:PID)\n"
    "  --max-jobs N          exit 0 after N jobs\n"
    "  --exit-when-idle      exit 0 after --idle-grace seconds (default 60)\n"
    "                        with no job\n"
    "  --log-level LEVEL     debug, info, warn or error (default info)\n";

typedef struct exec_opts {
    const char *server, *token_file, *command, *trainer, *gpus, *work_dir;
    const char *name;
    int grace_s, max_jobs, exit_when_idle, idle_grace_s;
} exec_opts;

/* ---- signals -------------------------------------------------------------- */

static volatile sig_atomic_t stop_signal;

/* ---- the command line, split without a shell ------------------------------ */

static void free_words(char **words)
{
    for (size_t i = 0; words && words[i]; i++)
        free(words[i]);
    free(words);
}

/* Words of cmd: blanks separate them, '...' and "..." quote, a backslash
 * outside single quotes escapes the next character; nothing is expanded.
 * Returns a NULL-terminated array (free with free_words), or NULL when a
 * quote is left open or there is no word. */
static char **split_words(const char *cmd)
{
    size_t cap = strlen(cmd) + 1, n = 0;
    char **words = bf_xcalloc(cap + 1, sizeof *words);
    char *buf = bf_xmalloc(cap), *out = NULL;
    char quote = 0;
    for (const char *p = cmd;; p++) {
        char c = *p;
        int blank = !quote && (c == ' ' || c == '\t' || c == '\n');
        if (c == '\0' && quote)
            break;   /* unclosed */
        if (c == '\0' || blank) {
            if (out) {
                *out = '\0';
                words[n++] = bf_xstrdup(buf);
                out = NULL;
            }
            if (c == '\0')
                break;
            continue;
        }
        if (!out)
            out = buf;
        if (quote && c == quote)
            quote = 0;
        else if (!quote && (c == '\'' || c == '"'))
            quote = c;
        else if (c == '\\' && quote != '\'' && p[1])
            *out++ = *++p;
        else
            *out++ = c;
    }
    free(buf);
    if (quote || n == 0) {
        free_words(words);
        return NULL;
    }
    return words;
}

/* ---- the trainer's process tree ------------------------------------------- */

/* Every live (not zombie) descendant of this process, found through
 * /proc's parent links: the worker is a subreaper, so a trainer's
 * orphans (ranks a launcher started in sessions of their own) are ours
 * and still found.  Returns how many, at most cap. */
static int descendants(pid_t *out, int cap)
{
    static pid_t pids[MAX_TREE * 4], parents[MAX_TREE * 4];
    int n = 0;
    DIR *proc = opendir("/proc");
    struct dirent *de;
    while (proc && (de = readdir(proc)) != NULL && n < MAX_TREE * 4) {
        char path[300], line[512];
        int pid = atoi(de->d_name);
        if (pid <= 0)
            continue;
        snprintf(path, sizeof path, "/proc/%d/stat", pid);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        char *paren = fgets(line, sizeof line, f) ? strrchr(line, ')') : NULL;
        char state;
        int ppid;
        if (paren && sscanf(paren + 1, " %c %d", &state, &ppid) == 2 &&
            state != 'Z') {
            pids[n] = pid;
            parents[n++] = ppid;
        }
        fclose(f);
    }
    if (proc)
        closedir(proc);
    int found = 0;
    for (int grew = 1; grew;) {   /* the closure of "parent is ours" */
        grew = 0;
        for (int i = 0; i < n && found < cap; i++) {
            int ours = parents[i] == getpid();
            for (int j = 0; !ours && j < found; j++)
                ours = parents[i] == out[j];
            for (int j = 0; ours && j < found; j++)
                ours = out[j] != pids[i];
            if (ours) {
                out[found++] = pids[i];
                grew = 1;
            }
        }
    }
    return found;
}

/* The child being watched and how it ended. */
typedef struct child {
    pid_t pid;
    int ended, status;
} child;

/* Reaps every ended process (the trainer, and orphans adopted as the
 * subreaper), keeping the trainer's status. */
static void reap(child *c)
{
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
        if (pid == c->pid) {
            c->ended = 1;
            c->status = status;
        }
}

static int seen(const pid_t *list, int n, pid_t pid)
{
    for (int i = 0; i < n; i++)
        if (list[i] == pid)
            return 1;
    return 0;
}

/* Ends the trainer's whole tree: SIGTERM to each process (once, new ones
 * too), SIGKILL to whatever is left after grace_ms; returns once none is
 * left (reaped).  Returns how many got SIGKILL. */
static int stop_tree(child *c, int grace_ms)
{
    static pid_t termed[MAX_TREE], live[MAX_TREE];
    int n_termed = 0, killed = 0;
    int64_t kill_at = bf_monotonic_ms() + grace_ms;
    for (;;) {
        reap(c);
        int n = descendants(live, MAX_TREE);
        if (n == 0)
            return killed;
        int late = bf_monotonic_ms() >= kill_at;
        for (int i = 0; i < n; i++) {
            if (late) {
                kill(live[i], SIGKILL);
                killed++;
            } else if (!seen(termed, n_termed, live[i]) &&
                       n_termed < MAX_TREE) {
                termed[n_termed++] = live[i];
                kill(live[i], SIGTERM);
            }
        }
        bf_sleep_ms(late ? 5 : POLL_MS);
    }
}

/* ---- one attempt's files and environment ---------------------------------- */

typedef struct attempt {
    int64_t job_id, attempt_id;
    char dir[PATH_MAX];          /* real path: checkpoints must be inside */
    char job_file[PATH_MAX + 16], records[PATH_MAX + 16];
    char ckpt_dir[PATH_MAX + 16], err_file[PATH_MAX + 16];
    char out_file[PATH_MAX + 16];
} attempt;

static int make_dir(const char *dir, bf_error *err)
{
    if (mkdir(dir, 0777) == 0 || errno == EEXIST)
        return 0;
    return bf_error_set(err, dir, 0, NULL, "cannot create directory: %s",
                        strerror(errno));
}

/* WORK/db-<database id>/job-<id>/attempt-<id>, made and resolved. */
static int attempt_dir(const char *work, const json_t *job, attempt *a,
                       bf_error *err)
{
    const char *db = json_string_value(json_object_get(job, "database_id"));
    char path[PATH_MAX];
    if (!db || strspn(db, "0123456789abcdef") != strlen(db) || !db[0])
        return bf_error_set(err, NULL, 0, "database_id", "the coordinator "
                            "sent no database id");
    snprintf(path, sizeof path, "%s/db-%s", work, db);
    if (make_dir(work, err) || make_dir(path, err))
        return -1;
    size_t len = strlen(path);
    snprintf(path + len, sizeof path - len, "/job-%lld", (long long)a->job_id);
    if (make_dir(path, err))
        return -1;
    len = strlen(path);
    snprintf(path + len, sizeof path - len, "/attempt-%lld",
             (long long)a->attempt_id);
    if (make_dir(path, err) || !realpath(path, a->dir))
        return bf_error_set(err, path, 0, NULL, "cannot use the attempt's "
                            "directory: %s", strerror(errno));
    snprintf(a->job_file, sizeof a->job_file, "%s/job.json", a->dir);
    snprintf(a->records, sizeof a->records, "%s/" RECORDS_FILE, a->dir);
    snprintf(a->ckpt_dir, sizeof a->ckpt_dir, "%s/checkpoints", a->dir);
    snprintf(a->err_file, sizeof a->err_file, "%s/stderr.log", a->dir);
    snprintf(a->out_file, sizeof a->out_file, "%s/stdout.log", a->dir);
    return make_dir(a->ckpt_dir, err);
}

/* The job's config as the trainer reads it, and an empty records file. */
static int write_files(const attempt *a, const json_t *config, bf_error *err)
{
    if (json_dump_file(config, a->job_file, JSON_SORT_KEYS | JSON_INDENT(1))
        != 0)
        return bf_error_set(err, a->job_file, 0, NULL, "cannot write the job "
                            "file");
    int fd = open(a->records, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return bf_error_set(err, a->records, 0, NULL, "cannot create the "
                            "records file: %s", strerror(errno));
    close(fd);
    return 0;
}

/* Appends NAME=VALUE to env (room was made for it). */
static void put_env(char **env, size_t *n, const char *name,
                    const char *value)
{
    size_t len = strlen(name) + strlen(value) + 2;
    env[*n] = bf_xmalloc(len);
    snprintf(env[(*n)++], len, "%s=%s", name, value);
}

/* The trainer's environment: ours without any BIFOCAL_* variable (nothing
 * of the daemon's reaches the child), then the attempt's. */
static char **child_env(const attempt *a, const json_t *job, const char *gpus)
{
    extern char **environ;
    size_t n = 0, total = 0;
    while (environ[total])
        total++;
    char **env = bf_xcalloc(total + 16, sizeof *env);
    for (size_t i = 0; i < total; i++)
        if (strncmp(environ[i], "BIFOCAL_", 8) != 0 &&
            strncmp(environ[i], "PYTHONUNBUFFERED=", 17) != 0 &&
            !(gpus && strncmp(environ[i], "CUDA_VISIBLE_DEVICES=", 21) == 0))
            env[n++] = bf_xstrdup(environ[i]);
    const char *resume = json_string_value(json_object_get(
        job, "resume_checkpoint"));
    char num[3][32];
    snprintf(num[0], sizeof num[0], "%lld", (long long)json_integer_value(
        json_object_get(job, "resume_step")));
    snprintf(num[1], sizeof num[1], "%lld", (long long)a->job_id);
    snprintf(num[2], sizeof num[2], "%lld", (long long)a->attempt_id);
    put_env(env, &n, "BIFOCAL_JOB", a->job_file);
    put_env(env, &n, "BIFOCAL_RECORDS", a->records);
    put_env(env, &n, "BIFOCAL_CHECKPOINT_DIR", a->ckpt_dir);
    put_env(env, &n, "BIFOCAL_RESUME_CHECKPOINT", resume ? resume : "");
    put_env(env, &n, "BIFOCAL_RESUME_STEP", resume ? num[0] : "0");
    put_env(env, &n, "BIFOCAL_JOB_ID", num[1]);
    put_env(env, &n, "BIFOCAL_ATTEMPT_ID", num[2]);
    put_env(env, &n, "BIFOCAL_ATTEMPT_DIR", a->dir);
    put_env(env, &n, "PYTHONUNBUFFERED", "1");
    if (gpus)
        put_env(env, &n, "CUDA_VISIBLE_DEVICES", gpus);
    return env;
}

/* In the child, between fork and exec: only async-signal-safe calls.
 * It dies with the worker (PDEATHSIG; a worker killed before the prctl
 * is caught by the getppid check), starts a process group of its own,
 * and gets the default signal dispositions back (the worker ignores
 * SIGPIPE, which exec would keep). */
static void become_trainer(const attempt *a, char **argv, char **env,
                           pid_t parent)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(127);
    setpgid(0, 0);
    signal(SIGPIPE, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    int in = open("/dev/null", O_RDONLY);
    int out = open(a->out_file, O_WRONLY | O_CREAT | O_APPEND, 0644);
    int err = open(a->err_file, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (in < 0 || out < 0 || err < 0 || chdir(a->dir) != 0)
        _exit(127);
    dup2(in, STDIN_FILENO);
    dup2(out, STDOUT_FILENO);
    dup2(err, STDERR_FILENO);
    close_range(3, ~0U, 0);   /* the link's socket stays ours */
    execvpe(argv[0], argv, env);
    static const char msg[] = "bifocal-worker: cannot execute the trainer\n";
    if (write(STDERR_FILENO, msg, sizeof msg - 1) < 0)
        _exit(127);
    _exit(127);
}

static pid_t start_trainer(const attempt *a, char **argv, char **env,
                           bf_error *err)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0)
        become_trainer(a, argv, env, parent);
    if (pid < 0)
        return bf_error_set(err, NULL, 0, NULL, "fork: %s", strerror(errno));
    setpgid(pid, pid);
    return pid;
}

/* ---- the records file ----------------------------------------------------- */

typedef struct tail {
    int fd;
    char *buf;           /* bytes read and not yet a whole line */
    size_t len;
    long line;           /* lines taken so far */
    int done;            /* a done record was seen */
    char fail[512];      /* a fail record's error ("" none) */
    char error[sizeof(((bf_error *)0)->msg) + 128];   /* a bad line */
    bf_record_read rr;
} tail;

/* A checkpoint record names an existing file inside the attempt's
 * directory (relative paths are from there): the coordinator hands it to
 * the next attempt, so it must be a file this attempt wrote.  The record
 * then carries its real path. */
static int check_checkpoint(const attempt *a, bf_record_read *rr,
                            bf_error *err)
{
    char joined[PATH_MAX * 2], real[PATH_MAX];
    const char *p = rr->r.u.checkpoint.path;
    snprintf(joined, sizeof joined, "%s%s%s", p[0] == '/' ? "" : a->dir,
             p[0] == '/' ? "" : "/", p);
    struct stat st;
    size_t dl = strlen(a->dir);
    if (!realpath(joined, real) || stat(real, &st) != 0 ||
        !S_ISREG(st.st_mode))
        return bf_error_set(err, NULL, 0, "path", "checkpoint '%.200s' is "
                            "not an existing file", p);
    if (strncmp(real, a->dir, dl) != 0 || real[dl] != '/')
        return bf_error_set(err, NULL, 0, "path", "checkpoint '%.200s' is "
                            "outside the attempt's directory %s", p, a->dir);
    free(rr->text);
    rr->text = bf_xstrdup(real);
    rr->r.u.checkpoint.path = rr->text;
    return 0;
}

/* One whole line: checked and handed to the link (the fail and done
 * records are kept for the end).  -1 with t->error naming the line. */
static int take_line(tail *t, const attempt *a, bf_link *link,
                     const char *text, size_t len)
{
    bf_error err;
    bf_error_clear(&err);
    t->line++;
    int rc = bf_record_from_line(text, len, &t->rr, &err);
    if (rc == 1)
        return 0;   /* a blank line carries nothing */
    if (rc == 0 && t->rr.r.kind == BF_RECORD_CHECKPOINT)
        rc = check_checkpoint(a, &t->rr, &err);
    if (rc == 0 && t->rr.r.kind == BF_RECORD_FAIL)
        snprintf(t->fail, sizeof t->fail, "%s", t->rr.r.u.fail.error);
    if (rc == 0 && t->rr.r.kind == BF_RECORD_DONE)
        t->done = 1;
    if (rc == 0)
        bf_link_emit(link, &t->rr.r);
    bf_record_read_clear(&t->rr);
    if (rc != 0)
        snprintf(t->error, sizeof t->error, RECORDS_FILE " line %ld: %s",
                 t->line, err.msg);
    return rc;
}

/* A line over MAX_RECORD_LINE, whole or still growing: -1. */
static int too_long(tail *t)
{
    snprintf(t->error, sizeof t->error, RECORDS_FILE " line %ld: longer "
             "than %d bytes", t->line + 1, MAX_RECORD_LINE);
    return -1;
}

/* Reads what the trainer appended and takes each whole line.  -1 on a bad
 * line (t->error says which and why). */
static int read_records(tail *t, const attempt *a, bf_link *link)
{
    char chunk[65536];
    ssize_t got;
    while ((got = read(t->fd, chunk, sizeof chunk)) > 0) {
        t->buf = bf_xrealloc(t->buf, t->len + (size_t)got + 1);
        memcpy(t->buf + t->len, chunk, (size_t)got);
        t->len += (size_t)got;
        char *start = t->buf, *nl;
        while ((nl = memchr(start, '\n', t->len - (size_t)(start - t->buf)))) {
            if (nl - start > MAX_RECORD_LINE)
                return too_long(t);
            if (take_line(t, a, link, start, (size_t)(nl - start)) != 0)
                return -1;
            start = nl + 1;
        }
        t->len -= (size_t)(start - t->buf);
        memmove(t->buf, start, t->len);
        if (t->len > MAX_RECORD_LINE)
            return too_long(t);
    }
    return 0;
}

/* After the trainer ended: the rest, and a last line without its newline
 * is an error (the trainer died while writing it, or forgot it). */
static int finish_records(tail *t, const attempt *a, bf_link *link)
{
    if (read_records(t, a, link) != 0)
        return -1;
    if (t->len == 0)
        return 0;
    t->buf[t->len] = '\0';   /* read_records left room for it */
    snprintf(t->error, sizeof t->error, RECORDS_FILE " line %ld is "
             "incomplete (no newline at its end): %.80s", t->line + 1,
             t->buf);
    return -1;
}

/* ---- one attempt ---------------------------------------------------------- */

typedef enum {
    END_EXITED,      /* the trainer ended by itself */
    END_BAD_RECORD,  /* a record broke the contract: stopped */
    END_CANCELLED, END_FENCED, END_LOST, END_SIGNAL
} attempt_end;

/* Why the attempt must stop now, or END_EXITED to keep watching. */
static attempt_end should_stop(bf_link *link, int lease_seconds)
{
    int state = bf_link_attempt_state(link);
    if (state == BF_LINK_CANCELLED)
        return END_CANCELLED;
    if (state == BF_LINK_FENCED)
        return END_FENCED;
    /* The coordinator expired the lease by now: another worker may have
     * the job, so this trainer must not go on writing its checkpoints. */
    if (bf_link_offline_ms(link) > (int64_t)lease_seconds * 1000)
        return END_LOST;
    return stop_signal ? END_SIGNAL : END_EXITED;
}

/* Watches the trainer until it ends or must be stopped. */
static attempt_end watch(child *c, tail *t, const attempt *a, bf_link *link,
                         int lease_seconds)
{
    for (;;) {
        if (read_records(t, a, link) != 0)
            return END_BAD_RECORD;
        reap(c);
        if (c->ended)
            return finish_records(t, a, link) ? END_BAD_RECORD : END_EXITED;
        attempt_end why = should_stop(link, lease_seconds);
        if (why != END_EXITED)
            return why;
        bf_sleep_ms(POLL_MS);
    }
}

/* The last bytes of the trainer's stderr, for a failure's message. */
static void stderr_tail(const attempt *a, char *out, size_t cap)
{
    out[0] = '\0';
    int fd = open(a->err_file, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    off_t size = lseek(fd, 0, SEEK_END);
    off_t from = size > STDERR_TAIL ? size - STDERR_TAIL : 0;
    ssize_t n = pread(fd, out, cap - 1 < STDERR_TAIL ? cap - 1 : STDERR_TAIL,
                      from);
    close(fd);
    out[n > 0 ? n : 0] = '\0';
    size_t len = strlen(out);
    while (len > 0 && (out[len - 1] == '\n' || out[len - 1] == ' '))
        out[--len] = '\0';
}

/* How the trainer ended in words: "exited with status 3" ... */
static void describe_exit(const child *c, const tail *t, char *out,
                          size_t cap)
{
    if (WIFSIGNALED(c->status))
        snprintf(out, cap, "trainer killed by signal %d%s",
                 WTERMSIG(c->status), t->done ? " after its done record" : "");
    else if (WEXITSTATUS(c->status) != 0)
        snprintf(out, cap, "trainer exited with status %d%s",
                 WEXITSTATUS(c->status),
                 t->done ? " after its done record" : "");
    else
        snprintf(out, cap, "trainer exited with status 0 without a done "
                 "record");
}

/* A retryable failure's message: what happened and the stderr tail. */
static void failure_text(const attempt *a, const char *what, char *out,
                         size_t cap)
{
    char err_tail[STDERR_TAIL + 1];
    stderr_tail(a, err_tail, sizeof err_tail);
    snprintf(out, cap, "%s%s%s", what, err_tail[0] ? "; stderr: ..." : "",
             err_tail);
}

/* Tells the coordinator how the attempt ended (error NULL: done). */
static void report(bf_link *link, const attempt *a, const char *error,
                   int permanent, int timeout_ms)
{
    bf_link_report(link, a->job_id, error, permanent, timeout_ms);
}

/* Reports the attempt by how it ended.  Returns 1 when the worker stops. */
static int report_end(bf_link *link, const attempt *a, attempt_end why,
                      const child *c, const tail *t, int lease_seconds)
{
    char text[4096];
    switch (why) {
    case END_EXITED:
        if (t->fail[0]) {
            report(link, a, t->fail, 1, -1);
        } else if (t->done && WIFEXITED(c->status) &&
                   WEXITSTATUS(c->status) == 0) {
            report(link, a, NULL, 0, -1);
        } else {
            char what[160];
            describe_exit(c, t, what, sizeof what);
            failure_text(a, what, text, sizeof text);
            report(link, a, text, 0, -1);
        }
        return 0;
    case END_BAD_RECORD:
        failure_text(a, t->error, text, sizeof text);
        report(link, a, text, 0, -1);
        return 0;
    case END_CANCELLED:
        report(link, a, "cancelled", 0, -1);
        return 0;
    case END_FENCED:
        report(link, a, NULL, 0, -1);   /* sends nothing: the lease is gone */
        return 0;
    case END_LOST:
        report(link, a, "coordinator lost for longer than the lease", 0,
               lease_seconds * 1000);
        return 0;
    case END_SIGNAL:
        report(link, a, "worker stopped by a signal", 0, -1);
        return 1;
    }
    return 0;
}

static const char *end_name(attempt_end why)
{
    static const char *const names[] = {
        [END_EXITED] = "ended", [END_BAD_RECORD] = "bad record",
        [END_CANCELLED] = "cancelled", [END_FENCED] = "lease lost",
        [END_LOST] = "coordinator lost", [END_SIGNAL] = "worker signalled",
    };
    return names[why];
}

/* Sets up the attempt's files; -1 with err (the job fails, retryable). */
static int prepare(const exec_opts *o, const json_t *job, attempt *a,
                   bf_error *err)
{
    const json_t *config = json_object_get(job, "config");
    const char *trainer = json_string_value(json_object_get(config,
                                                            "trainer"));
    if (!trainer || strcmp(trainer, o->trainer) != 0)
        return bf_error_set(err, NULL, 0, "trainer", "leased a job of "
                            "trainer '%s' to a worker of '%s'",
                            trainer ? trainer : BF_TRAINER_BUILTIN,
                            o->trainer);
    return attempt_dir(o->work_dir, job, a, err) ||
           write_files(a, config, err) ? -1 : 0;
}

/* Runs one leased job's trainer and reports it.  1: the worker stops. */
static int run_job(const exec_opts *o, char **argv, bf_link *link,
                   const json_t *job)
{
    attempt a = { .job_id = json_integer_value(json_object_get(job,
                                                               "job_id")),
                  .attempt_id = json_integer_value(json_object_get(
                      job, "attempt_id")) };
    int lease_s = (int)json_integer_value(json_object_get(job,
                                                          "lease_seconds"));
    bf_link_begin_attempt(link, a.attempt_id, lease_s);
    bf_error err;
    bf_error_clear(&err);
    tail *t = bf_xcalloc(1, sizeof *t);
    t->fd = -1;
    child c = {0};
    char **env = NULL;
    if (prepare(o, job, &a, &err) != 0 ||
        (t->fd = open(a.records, O_RDONLY | O_CLOEXEC)) < 0 ||
        (env = child_env(&a, job, o->gpus),
         (c.pid = start_trainer(&a, argv, env, &err)) < 0)) {
        if (!err.msg[0])
            bf_error_set(&err, a.records, 0, NULL, "%s", strerror(errno));
        bf_log_error("job %lld: %s", (long long)a.job_id, err.msg);
        report(link, &a, err.msg, 0, -1);
        if (t->fd >= 0)
            close(t->fd);
        free_words(env);
        free(t);
        return 0;
    }
    bf_log_info("job %lld: attempt %lld runs the trainer (pid %d) in %s",
                (long long)a.job_id, (long long)a.attempt_id, (int)c.pid,
                a.dir);
    attempt_end why = watch(&c, t, &a, link, lease_s);
    /* Also after a trainer that ended by itself: what it left running
     * goes before the next lease. */
    int killed = stop_tree(&c, o->grace_s * 1000);
    bf_log_info("job %lld: trainer %s%s", (long long)a.job_id, end_name(why),
                killed ? "; processes left after the grace got SIGKILL" : "");
    if (why == END_BAD_RECORD)
        bf_log_error("job %lld: %s", (long long)a.job_id, t->error);
    int stop = report_end(link, &a, why, &c, t, lease_s);
    close(t->fd);
    free(t->buf);
    free(t);
    free_words(env);
    return stop;
}

/* ---- the job loop --------------------------------------------------------- */

/* After a no_job: whether --exit-when-idle says to exit.  *idle_since is
 * when the spell without work began (-1: none yet). */
static int idle_over(const exec_opts *o, double *idle_since)
{
    if (*idle_since < 0)
        *idle_since = bf_now_seconds();
    return o->exit_when_idle &&
           bf_now_seconds() - *idle_since >= o->idle_grace_s;
}

static int lead(const exec_opts *o, char **argv, bf_link *link)
{
    int jobs = 0;
    double idle_since = -1;
    while (!stop_signal && (o->max_jobs == 0 || jobs < o->max_jobs)) {
        json_t *job = NULL;
        bf_link_no_job none;
        bf_error err;
        bf_error_clear(&err);
        int got = bf_link_request_job(link, &job, &none, &err);
        if (got == BF_LINK_INTERRUPTED)
            break;
        if (got == BF_LINK_ERR) {
            bf_log_error("%s", err.msg);
            return EXIT_RUNTIME;
        }
        if (got == 0) {
            if (!none.pending && idle_over(o, &idle_since))
                break;
            if (none.pending)
                idle_since = -1;
            bf_link_sleep(link, none.retry_ms);
            continue;
        }
        idle_since = -1;
        jobs++;
        int stop = run_job(o, argv, link, job);
        json_decref(job);
        if (stop)
            break;
    }
    return 0;
}

/* ---- the program ---------------------------------------------------------- */

int bf_exec_requested(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--exec") == 0 ||
            strncmp(argv[i], "--exec=", 7) == 0)
            return 1;
    return 0;
}

static const char *check_options(const exec_opts *o, int level)
{
    if (level < 0)
        return "--log-level is debug, info, warn or error";
    if (!o->server)
        return "--server HOST:PORT is required";
    if (!o->token_file)
        return "--token-file FILE is required";
    if (!o->trainer)
        return "--trainer NAME is required with --exec";
    if (!bf_job_config_trainer_name_ok(o->trainer) ||
        strcmp(o->trainer, BF_TRAINER_BUILTIN) == 0)
        return "--trainer NAME: 1 .. 63 lowercase letters, digits, '_' or "
               "'-', starting with a letter, and not builtin";
    return NULL;
}

/* Parses argv into o: 0, -1 for --help, EXIT_USAGE. */
static int parse_options(int argc, char **argv, exec_opts *o)
{
    const char *log_level = NULL;
    const bf_option options[] = {
        BF_OPT_STR("server", "HOST:PORT", &o->server),
        BF_OPT_STR("token-file", "FILE", &o->token_file),
        BF_OPT_STR("exec", "CMD", &o->command),
        BF_OPT_STR("trainer", "NAME", &o->trainer),
        BF_OPT_STR("gpus", "LIST", &o->gpus),
        BF_OPT_STR("work-dir", "DIR", &o->work_dir),
        BF_OPT_INT("grace", "S", &o->grace_s, 0, 3600),
        BF_OPT_STR("name", "NAME", &o->name),
        BF_OPT_INT("max-jobs", "N", &o->max_jobs, 1, INT_MAX),
        BF_OPT_FLAG("exit-when-idle", &o->exit_when_idle),
        BF_OPT_INT("idle-grace", "S", &o->idle_grace_s, 0, INT_MAX),
        BF_OPT_STR("log-level", "LEVEL", &log_level),
        BF_OPT_END,
    };
    bf_args a = { .prog = "bifocal-worker", .options = options };
    int rc = bf_args_parse(&a, argc, argv);
    if (rc == BF_ARGS_HELP) {
        fputs(usage_text, stdout);
        return -1;
    }
    if (rc != BF_ARGS_OK)
        return EXIT_USAGE;
    int level = log_level ? bf_log_level_from_name(log_level) : BF_LOG_INFO;
    const char *problem = check_options(o, level);
    if (problem) {
        fprintf(stderr, "bifocal-worker: %s\n%s", problem, usage_text);
        return EXIT_USAGE;
    }
    bf_log_set_level((bf_log_level)level);
    return 0;
}

static int open_link(const exec_opts *o, bf_link **link, bf_error *err)
{
    char token[BF_TOKEN_HEX_LEN + 1], host[256] = "", name[320];
    if (bf_wire_read_token(o->token_file, token, sizeof token, err) != 0)
        return -1;
    gethostname(host, sizeof host - 1);
    snprintf(name, sizeof name, "%s", o->name ? o->name : "");
    if (!o->name)
        snprintf(name, sizeof name, "%s:%ld", host, (long)getpid());
    bf_link_opts lo = { .server = o->server, .token = token, .name = name,
                        .host = host, .ranks = 1, .trainer = o->trainer,
                        .interrupt = &stop_signal };
    int rc = bf_link_start(link, &lo, err);
    memset(token, 0, sizeof token);
    return rc;
}

int bf_exec_main(int argc, char **argv)
{
    exec_opts o = { .work_dir = "bifocal-exec", .grace_s = DEFAULT_GRACE_S,
                    .idle_grace_s = 60 };
    int status = parse_options(argc, argv, &o);
    if (status != 0)
        return status < 0 ? 0 : status;
    char **words = split_words(o.command);
    if (!words) {
        fprintf(stderr, "bifocal-worker: --exec '%s': an unclosed quote or "
                "no command\n", o.command);
        return EXIT_USAGE;
    }
    /* Orphans of the trainer (ranks a launcher put in new sessions) become
     * ours, so a stop finds and ends them too. */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    signal(SIGPIPE, SIG_IGN);
    bf_link *link = NULL;
    bf_error err;
    bf_error_clear(&err);
    if (open_link(&o, &link, &err) != 0) {
        bf_log_error("%s", err.msg);
        free_words(words);
        return EXIT_RUNTIME;
    }
    bf_link_catch_stop_signals(&stop_signal, link);
    bf_log_info("exec worker: trainer %s, command %s, coordinator %s",
                o.trainer, o.command, o.server);
    status = lead(&o, words, link);
    bf_link_catch_stop_signals(&stop_signal, NULL);
    bf_link_stop(link);
    free_words(words);
    if (stop_signal)
        bf_log_info("stopped by signal %d", stop_signal);
    return status;
}
