/* run: `bifocal run FILE`, the embedded default.
 *
 * One command does what a cluster user does by hand: it starts a bifocald on
 * a free loopback port with the database at ./bifocal.db (or --db), starts
 * G local worker groups (`mpirun -np N bifocal-worker --server ...`) and,
 * unless --no-dashboard, a `bifocal dashboard` on the database (its URL is
 * printed), submits the sweep, follows it with a progress bar, prints the
 * results table, and stops everything it started.  The database stays behind for
 * `sqlite3` queries.  Run again on the same --db after an interruption, it
 * follows the unfinished sweep of the same file instead of submitting it
 * twice, so finished jobs stay done and running ones resume from their
 * checkpoints.
 *
 * Children are libuv processes on a private loop that is run without
 * blocking between status polls, so their exits are noticed at once: a dead
 * daemon or the death of every worker group ends the run with an error
 * pointing at the log file instead of watching forever. */
#include "run.h"
#include "command.h"
#include "results.h"
#include "watch.h"

#include "alloc.h"
#include "clock.h"
#include "stop_signals.h"
#include "stream.h"
#include "wire.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#define BF_RUN_PORT_WAIT_MS 15000
#define BF_RUN_DEFAULT_DASHBOARD "127.0.0.1:8080"
#define BF_RUN_STOP_WAIT_MS 15000

typedef struct bf_child {
    uv_process_t proc;
    char what[64];          /* "bifocald", "worker group 1", for messages */
    int running;
    int64_t exit_status;
    int term_signal;
} bf_child;

typedef struct bf_run_opts {
    const char *sweep_file;
    const char *db;
    const char *checkpoint_dir;   /* NULL: <db>.checkpoints */
    int groups, ranks;
    int lease_seconds;
    int strict;                   /* warnings reject the sweep */
    const char *dashboard;        /* HOST:PORT */
    int no_dashboard;
    int progress;                 /* per-step lines without a terminal */
} bf_run_opts;

typedef struct bf_run {
    uv_loop_t loop;
    bf_child daemon, dashboard;
    bf_child *groups;
    int n_groups;
    char daemon_bin[PATH_MAX], worker_bin[PATH_MAX];
    char port_file[PATH_MAX], token_file[PATH_MAX], log_file[PATH_MAX];
    char dashboard_port_file[PATH_MAX];
    char dashboard_url[300];      /* "" when none runs */
    char checkpoint_dir[PATH_MAX];
    char server[64];
    int log_fd;
} bf_run;

static volatile sig_atomic_t interrupted;

static void on_interrupt(int sig)
{
    (void)sig;
    interrupted = 1;
}

/* ---- finding the other binaries ------------------------------------------- */

static int is_executable(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* The daemon and the worker are looked for, in order: in $env; beside this
 * binary (an install); in ../SUBDIR/ relative to it (the build tree); on
 * PATH.  Returns 0 with out filled, -1 if nowhere. */
static int find_binary(const char *name, const char *subdir, const char *env,
                       char *out, size_t cap)
{
    const char *override = getenv(env);
    if (override && *override) {
        snprintf(out, cap, "%s", override);
        return is_executable(out) ? 0 : -1;
    }
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash)
            *slash = '\0';
        if ((size_t)snprintf(out, cap, "%s/%s", self, name) < cap
            && is_executable(out))
            return 0;
        if ((size_t)snprintf(out, cap, "%s/../%s/%s", self, subdir, name) < cap
            && is_executable(out))
            return 0;
    }
    const char *path = getenv("PATH");
    for (const char *p = path; p && *p;) {
        size_t len = strcspn(p, ":");
        if (len > 0
            && (size_t)snprintf(out, cap, "%.*s/%s", (int)len, p, name) < cap
            && is_executable(out))
            return 0;
        p += len + (p[len] == ':');
    }
    return -1;
}

/* ---- children ------------------------------------------------------------- */

static void on_child_exit(uv_process_t *proc, int64_t status, int term_signal)
{
    bf_child *c = (bf_child *)proc;
    c->running = 0;
    c->exit_status = status;
    c->term_signal = term_signal;
}

/* Starts argv as child c with stdin closed and stdout/stderr appended to the
 * run's log file. */
static int spawn_child(bf_run *r, bf_child *c, char **argv)
{
    uv_stdio_container_t stdio[3] = {
        { .flags = UV_IGNORE },
        { .flags = UV_INHERIT_FD, .data.fd = r->log_fd },
        { .flags = UV_INHERIT_FD, .data.fd = r->log_fd },
    };
    uv_process_options_t o = {
        .exit_cb = on_child_exit,
        .file = argv[0],
        .args = argv,
        .stdio = stdio,
        .stdio_count = 3,
    };
    int rc = uv_spawn(&r->loop, &c->proc, &o);
    if (rc != 0) {
        fprintf(stderr, "bifocal run: cannot start %s (%s): %s\n", c->what,
                argv[0], uv_strerror(rc));
        return -1;
    }
    c->running = 1;
    return 0;
}

static void describe_exit(const bf_child *c, char *buf, size_t cap)
{
    if (c->term_signal)
        snprintf(buf, cap, "%s was killed by signal %d", c->what,
                 c->term_signal);
    else
        snprintf(buf, cap, "%s exited with status %lld", c->what,
                 (long long)c->exit_status);
}

/* Waits until every child in cs[0..n) has exited or ms have passed;
 * returns the number still running. */
static int wait_children(bf_run *r, bf_child *const *cs, int n, int ms)
{
    for (int waited = 0;; waited += 50) {
        uv_run(&r->loop, UV_RUN_NOWAIT);
        int alive = 0;
        for (int i = 0; i < n; i++)
            alive += cs[i]->running;
        if (alive == 0 || waited >= ms)
            return alive;
        bf_sleep_ms(50);
    }
}

/* SIGTERM, a grace period, then SIGKILL. */
static void stop_children(bf_run *r, bf_child *const *cs, int n)
{
    for (int i = 0; i < n; i++)
        if (cs[i]->running)
            uv_process_kill(&cs[i]->proc, SIGTERM);
    if (wait_children(r, cs, n, BF_RUN_STOP_WAIT_MS) == 0)
        return;
    for (int i = 0; i < n; i++)
        if (cs[i]->running) {
            fprintf(stderr, "bifocal run: %s did not stop; killing it\n",
                    cs[i]->what);
            uv_process_kill(&cs[i]->proc, SIGKILL);
        }
    wait_children(r, cs, n, BF_RUN_STOP_WAIT_MS);
}

/* ---- the daemon ----------------------------------------------------------- */

/* Reads the port the daemon wrote once it listens.  0 until then. */
static int read_port(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    int port = 0;
    if (fscanf(f, "%d", &port) != 1)
        port = 0;
    fclose(f);
    return port;
}

/* Waits until child c (just started) writes its port into path: the
 * port, or 0 when it exited, was interrupted or took too long. */
static int wait_for_port(bf_run *r, bf_child *c, const char *path)
{
    for (int waited = 0; waited < BF_RUN_PORT_WAIT_MS; waited += 50) {
        int port = read_port(path);
        if (port > 0)
            return port;
        uv_run(&r->loop, UV_RUN_NOWAIT);
        if (!c->running || interrupted)
            break;
        bf_sleep_ms(50);
    }
    return 0;
}

static int start_daemon(bf_run *r, const bf_run_opts *o)
{
    char lease[16];
    snprintf(lease, sizeof lease, "%d", o->lease_seconds);
    unlink(r->port_file);
    char *argv[] = { r->daemon_bin, "--db", (char *)o->db,
                     "--listen", "127.0.0.1:0", "--port-file", r->port_file,
                     "--lease-seconds", lease, "--log-level", "warn", NULL };
    snprintf(r->daemon.what, sizeof r->daemon.what, "bifocald");
    if (spawn_child(r, &r->daemon, argv))
        return -1;
    int port = wait_for_port(r, &r->daemon, r->port_file);
    if (port > 0) {
        snprintf(r->server, sizeof r->server, "127.0.0.1:%d", port);
        return 0;
    }
    char why[128];
    if (interrupted)
        snprintf(why, sizeof why, "interrupted while bifocald was starting");
    else if (r->daemon.running)
        snprintf(why, sizeof why, "bifocald did not start listening");
    else
        describe_exit(&r->daemon, why, sizeof why);
    fprintf(stderr, "bifocal run: %s; see %s\n", why, r->log_file);
    return -1;
}

/* ---- the dashboard -------------------------------------------------------- */

/* `bifocal dashboard` (this binary) on the database, listening on listen;
 * 0 with its URL noted, or -1 when it did not start listening. */
static int spawn_dashboard(bf_run *r, const bf_run_opts *o, const char *listen)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return -1;
    self[n] = '\0';
    unlink(r->dashboard_port_file);
    char *argv[] = { self, "dashboard", "--db", (char *)o->db, "--listen",
                     (char *)listen, "--port-file", r->dashboard_port_file,
                     "--log-level", "warn", NULL };
    snprintf(r->dashboard.what, sizeof r->dashboard.what, "the dashboard");
    if (spawn_child(r, &r->dashboard, argv))
        return -1;
    int port = wait_for_port(r, &r->dashboard, r->dashboard_port_file);
    if (port <= 0)
        return -1;
    char host[256];
    bf_error err;
    int ignored;
    bf_wire_parse_host_port(listen, host, sizeof host, &ignored, &err);
    snprintf(r->dashboard_url, sizeof r->dashboard_url, "http://%s:%d",
             strcmp(host, "0.0.0.0") == 0 ? "127.0.0.1" : host, port);
    return 0;
}

/* The dashboard is a convenience: when its port is taken the run goes on
 * (on any free port if the default one was busy, else without it). */
static void start_dashboard(bf_run *r, const bf_run_opts *o)
{
    if (o->no_dashboard || spawn_dashboard(r, o, o->dashboard) == 0)
        return;
    bf_child *c[] = { &r->dashboard };
    stop_children(r, c, 1);
    if (strcmp(o->dashboard, BF_RUN_DEFAULT_DASHBOARD) == 0
        && spawn_dashboard(r, o, "127.0.0.1:0") == 0)
        return;
    stop_children(r, c, 1);
    fprintf(stderr, "bifocal run: the dashboard did not start on %s (see %s); "
                    "going on without it\n", o->dashboard, r->log_file);
}

/* ---- worker groups -------------------------------------------------------- */

static int start_group(bf_run *r, int index, int ranks, int share_cores)
{
    bf_child *c = &r->groups[index];
    char np[16], name[64];
    snprintf(np, sizeof np, "%d", ranks);
    snprintf(name, sizeof name, "local-%d", index + 1);
    snprintf(c->what, sizeof c->what, "worker group %d", index + 1);
    /* A lone group that fits the cores keeps Open MPI's one-rank-per-core
     * binding (about 10% faster).  Several groups would each bind from core
     * 0 up and pile onto the same cores, and more ranks than cores need
     * --oversubscribe: then the kernel places the ranks.  Running as root
     * (CI) must be allowed explicitly. */
    char *argv[24];
    int n = 0;
    argv[n++] = "mpirun";
    argv[n++] = "-np";
    argv[n++] = np;
    if (share_cores) {
        argv[n++] = "--oversubscribe";
        argv[n++] = "--bind-to";
        argv[n++] = "none";
    }
    if (geteuid() == 0)
        argv[n++] = "--allow-run-as-root";
    argv[n++] = r->worker_bin;
    argv[n++] = "--server";
    argv[n++] = r->server;
    argv[n++] = "--token-file";
    argv[n++] = r->token_file;
    argv[n++] = "--checkpoint-dir";
    argv[n++] = r->checkpoint_dir;
    argv[n++] = "--name";
    argv[n++] = name;
    argv[n] = NULL;
    char mpirun[PATH_MAX];
    if (find_binary("mpirun", ".", "BIFOCAL_MPIRUN", mpirun, sizeof mpirun)) {
        fprintf(stderr, "bifocal run: mpirun not found (install openmpi-bin)\n");
        return -1;
    }
    argv[0] = mpirun;
    return spawn_child(r, c, argv);
}

static int groups_alive(const bf_run *r)
{
    int alive = 0;
    for (int i = 0; i < r->n_groups; i++)
        alive += r->groups[i].running;
    return alive;
}

/* ---- the run -------------------------------------------------------------- */

/* Called between status polls of the watch: reaps children and says whether
 * to give up (non-zero) because nobody can finish the sweep any more. */
static int check_children(void *ctx)
{
    bf_run *r = ctx;
    uv_run(&r->loop, UV_RUN_NOWAIT);
    char why[128];
    if (interrupted) {
        fprintf(stderr, "\nbifocal run: interrupted; stopping (the sweep stays "
                        "in the database: run again to resume it)\n");
        return 1;
    }
    if (!r->daemon.running) {
        describe_exit(&r->daemon, why, sizeof why);
        fprintf(stderr, "\nbifocal run: %s; see %s\n", why, r->log_file);
        return 1;
    }
    if (groups_alive(r) == 0) {
        describe_exit(&r->groups[0], why, sizeof why);
        fprintf(stderr, "\nbifocal run: every worker group has stopped (%s); "
                        "see %s\n", why, r->log_file);
        return 1;
    }
    return 0;
}

static int parse_run_args(int argc, char **argv, bf_run_opts *o)
{
    *o = (bf_run_opts){ .db = "./bifocal.db", .groups = 1, .ranks = 2,
                        .lease_seconds = 30,
                        .dashboard = BF_RUN_DEFAULT_DASHBOARD };
    const bf_option options[] = {
        BF_OPT_STR("db", "FILE", &o->db),
        BF_OPT_INT("groups", "G", &o->groups, 1, 1024),
        BF_OPT_INT("ranks", "N", &o->ranks, 1, 1024),
        BF_OPT_STR("checkpoint-dir", "DIR", &o->checkpoint_dir),
        BF_OPT_INT("lease-seconds", "S", &o->lease_seconds, 1, 1024),
        BF_OPT_FLAG("strict", &o->strict),
        BF_OPT_STR("dashboard", "HOST:PORT", &o->dashboard),
        BF_OPT_FLAG("no-dashboard", &o->no_dashboard),
        BF_OPT_FLAG("progress", &o->progress),
        BF_OPT_END,
    };
    int n = bf_command_args(options, &o->sweep_file, 1, argc, argv);
    if (n < 0)
        return -1;
    if (n != 1) {
        fprintf(stderr, "bifocal run: expected one sweep FILE\n");
        return -1;
    }
    return 0;
}

static int prepare(bf_run *r, const bf_run_opts *o)
{
    if (find_binary("bifocald", "server", "BIFOCALD", r->daemon_bin,
                    sizeof r->daemon_bin)
        || find_binary("bifocal-worker", "worker", "BIFOCAL_WORKER",
                       r->worker_bin, sizeof r->worker_bin)) {
        fprintf(stderr, "bifocal run: cannot find bifocald and bifocal-worker "
                        "(beside this binary, in the build tree, or on PATH; "
                        "or set BIFOCALD / BIFOCAL_WORKER)\n");
        return -1;
    }
    snprintf(r->port_file, sizeof r->port_file, "%s.port", o->db);
    snprintf(r->token_file, sizeof r->token_file, "%s.token", o->db);
    snprintf(r->log_file, sizeof r->log_file, "%s.log", o->db);
    snprintf(r->dashboard_port_file, sizeof r->dashboard_port_file,
             "%s.dashboard.port", o->db);
    snprintf(r->checkpoint_dir, sizeof r->checkpoint_dir, "%s",
             o->checkpoint_dir ? o->checkpoint_dir : "");
    if (!o->checkpoint_dir)
        snprintf(r->checkpoint_dir, sizeof r->checkpoint_dir,
                 "%s.checkpoints", o->db);
    if (mkdir(r->checkpoint_dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "bifocal run: cannot create %s: %s\n",
                r->checkpoint_dir, strerror(errno));
        return -1;
    }
    r->log_fd = open(r->log_file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
                     0644);
    if (r->log_fd < 0) {
        fprintf(stderr, "bifocal run: cannot open %s: %s\n", r->log_file,
                strerror(errno));
        return -1;
    }
    return 0;
}

/* The unfinished sweep that an earlier, interrupted run of the same file
 * left in this database (0: none), with its job count in *n_jobs.  Following
 * it again, instead of submitting the file twice, lets an interrupted run
 * pick up where it stopped: its finished jobs stay finished and its
 * checkpoints are resumed. */
static int64_t unfinished_sweep(bf_client *cl, const char *file, int *n_jobs)
{
    json_t *reply;
    int64_t found = 0;
    if (bf_session_request(cl, json_pack("{s:s}", "type", "status"), &reply))
        return 0;
    size_t i;
    json_t *row;
    json_array_foreach(json_object_get(reply, "sweeps"), i, row) {
        const char *name = json_string_value(json_object_get(row, "filename"));
        const char *status = json_string_value(json_object_get(row, "status"));
        json_int_t open = json_integer_value(json_object_get(row, "waiting"))
                          + json_integer_value(json_object_get(row, "queued"))
                          + json_integer_value(json_object_get(row, "running"));
        if (name && status && strcmp(name, file) == 0
            && strcmp(status, "active") == 0 && open > 0) {
            found = json_integer_value(json_object_get(row, "sweep_id"));
            *n_jobs = (int)json_integer_value(json_object_get(row, "total"));
        }
    }
    json_decref(reply);
    return found;
}

/* Submits (or resumes), follows and reports the sweep on a running daemon
 * and groups. */
static int submit_and_follow(bf_run *r, bf_client *cl, const bf_run_opts *o)
{
    int n_jobs;
    int64_t sweep = unfinished_sweep(cl, o->sweep_file, &n_jobs);
    if (sweep > 0)
        printf("resuming sweep %lld, left unfinished in %s by an earlier run "
               "of %s\n", (long long)sweep, o->db, o->sweep_file);
    else if (bf_session_submit(cl, o->sweep_file, o->strict, &sweep, &n_jobs))
        return 1;
    printf("sweep %lld: %d jobs on %d worker group(s) x %d rank(s); "
           "database %s\n", (long long)sweep, n_jobs, o->groups, o->ranks,
           o->db);
    if (r->dashboard_url[0])
        printf("dashboard: %s/sweeps/%lld\n", r->dashboard_url,
               (long long)sweep);
    fflush(stdout);
    bf_watch_opts watch = { .tick = check_children, .ctx = r,
                            .progress = o->progress };
    if (bf_client_watch(cl, sweep, &watch))
        return 1;
    printf("\n");
    bf_source src;
    bf_source_open(&src, cl, NULL);
    int status = bf_results_print(&src, sweep, NULL, BF_FORMAT_TABLE);
    return bf_results_check_failed(&src, sweep) || status;
}

static void close_handle(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

/* Groups first, so their last records reach the daemon before it stops;
 * the dashboard with them. */
static void stop_everything(bf_run *r)
{
    bf_child *all[r->n_groups + 1];
    for (int i = 0; i < r->n_groups; i++)
        all[i] = &r->groups[i];
    all[r->n_groups] = &r->dashboard;
    stop_children(r, all, r->n_groups + 1);
    all[0] = &r->daemon;
    stop_children(r, all, 1);
}

int bf_client_cmd_run(bf_client *cl, int argc, char **argv)
{
    bf_run_opts o;
    if (parse_run_args(argc, argv, &o))
        return 2;
    bf_run r = { .log_fd = -1 };
    /* Before any other libuv call: libuv allocates through common/alloc. */
    bf_stream_use_allocator();
    uv_loop_init(&r.loop);
    int status = 1;
    if (prepare(&r, &o))
        goto out;
    bf_catch_stop_signals(on_interrupt);
    /* A daemon that did not start listening in time (or was interrupted
     * while starting) may still be running: it used to be left behind, as
     * `out` only closes the handles.  `stop` stops whatever is running. */
    if (start_daemon(&r, &o))
        goto stop;
    r.groups = bf_xcalloc((size_t)o.groups, sizeof *r.groups);
    int share_cores = o.groups > 1 || o.ranks > (int)sysconf(_SC_NPROCESSORS_ONLN);
    for (int i = 0; i < o.groups; i++, r.n_groups++)
        if (start_group(&r, i, o.ranks, share_cores))
            goto stop;
    start_dashboard(&r, &o);
    cl->server = r.server;
    cl->token_file = r.token_file;
    status = submit_and_follow(&r, cl, &o);
stop:
    bf_session_close(cl);
    stop_everything(&r);
out:
    uv_walk(&r.loop, close_handle, NULL);
    uv_run(&r.loop, UV_RUN_DEFAULT);
    uv_loop_close(&r.loop);
    free(r.groups);
    if (r.log_fd >= 0)
        close(r.log_fd);
    unlink(r.port_file);
    unlink(r.dashboard_port_file);
    return interrupted ? 130 : status;
}
