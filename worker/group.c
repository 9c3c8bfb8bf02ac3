#include "group.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "args.h"
#include "checkpoint.h"
#include "clock.h"
#include "isa.h"
#include "log.h"
#include "mem_limit.h"
#include "records.h"
#include "wire.h"

enum { EXIT_RUNTIME = 1, EXIT_USAGE = 2 };
enum { TRAIN_SETUP_FAILED = -1, TRAIN_RUN_FAILED = -2,
       TRAIN_SETUP_PERMANENT = -3 };

/* How often idle ranks look whether rank 0 has broadcast the next job: a
 * blocking MPI_Bcast would spin a core for as long as rank 0 waits. */
#define IDLE_POLL_NS 2000000L
/* --exit-when-idle waits this long with no job before it exits: a group
 * that starts before the sweep is submitted, or while every job is leased
 * elsewhere, must not give its nodes back at once. */
#define DEFAULT_IDLE_GRACE_S 60

static const char usage_text[] =
    "usage: mpirun -np N bifocal-worker --server HOST:PORT --token-file FILE\n"
    "           [--checkpoint-dir DIR] [--name NAME] [--max-jobs N]\n"
    "           [--memory-budget MIB]\n"
    "           [--exit-when-idle [--idle-grace S]]\n"
    "           [--log-level debug|info|warn|error]\n"
    "\n"
    "A worker group: rank 0 asks the coordinator for jobs, every rank trains\n"
    "them together (the batch is split over the ranks).\n"
    "  --server HOST:PORT    the coordinator (bifocald --listen)\n"
    "  --token-file FILE     its token file (DB.token, mode 0600)\n"
    "  --checkpoint-dir DIR  checkpoints in DIR/db-<database id>/job-<id>/\n"
    "                        (a shared file system on a cluster); without it\n"
    "                        no checkpoints are written and a re-leased job\n"
    "                        starts over\n"
    "  --memory-budget MIB   memory each rank may allocate (default: this\n"
    "                        node's memory or its cgroup's limit, the less,\n"
    "                        / its ranks); a job needing more\n"
    "                        fails for good before allocating\n"
    "  --name NAME           worker name (default HOST:PID)\n"
    "  --max-jobs N          exit 0 after N jobs\n"
    "  --exit-when-idle      exit 0 when the coordinator has had no job\n"
    "                        for this group for --idle-grace seconds; it\n"
    "                        stays while jobs wait on jobs running (a\n"
    "                        later stage's, a held adaptive seed)\n"
    "  --idle-grace S        default 60; 0 exits at the first no-job\n"
    "  --log-level LEVEL     least severe event logged (default info)\n";

typedef struct group_opts {
    const char *server, *token_file, *checkpoint_dir, *name;
    int max_jobs;          /* 0: no limit */
    int exit_when_idle;
    int idle_grace_s;      /* --exit-when-idle: seconds without a job */
    int memory_budget_mib; /* 0: node memory / ranks on the node */
} group_opts;

typedef struct group {
    MPI_Comm comm;
    int rank, nranks;
    group_opts o;
    bf_link *link;         /* rank 0 only */
    size_t memory_budget;  /* this rank's, bytes */
    /* --checkpoint-dir made absolute (rank 0): the paths reported to the
     * coordinator must mean the same to every group. */
    char checkpoint_root[BF_PATH_MAX - 64];   /* room for "/db-<id>/job-<id>" */
} group;

/* ---- signals -------------------------------------------------------------- */

static volatile sig_atomic_t stop_signal;

/* SIGTERM/SIGINT make bf_group_train stop after the current step (and
 * wake `link`, which may be NULL, on rank 0). */
static void catch_signals(bf_link *link)
{
    bf_link_catch_stop_signals(&stop_signal, link);
}

/* ---- the trainer's hooks -------------------------------------------------- */

typedef struct hooks_ctx {
    MPI_Comm comm;
    bf_link *link;
} hooks_ctx;

static void allreduce_sum(void *ctx, float *buf, size_t n)
{
    hooks_ctx *h = ctx;
    for (size_t off = 0; off < n; off += INT_MAX) {
        size_t chunk = n - off < INT_MAX ? n - off : INT_MAX;
        MPI_Allreduce(MPI_IN_PLACE, buf + off, (int)chunk, MPI_FLOAT,
                      MPI_SUM, h->comm);
    }
}

static void emit_to_link(void *ctx, const bf_record *record)
{
    hooks_ctx *h = ctx;
    if (h->link)
        bf_link_emit(h->link, record);
}

/* This rank's vote; the trainer sums the votes in the step's gradient
 * allreduce, so all ranks stop after the same step. */
static int should_stop(void *ctx)
{
    hooks_ctx *h = ctx;
    return stop_signal != 0 ||
           (h->link && bf_link_attempt_state(h->link) != BF_LINK_OK);
}

/* Setup can fail on one rank only (a file missing on one node): all ranks
 * learn it, with the lowest failing rank's message and whether its failure
 * is permanent (BF_TRAIN_PERMANENT), and none starts.  created is that
 * rank's bf_trainer_create result. */
static int agree_on_setup(MPI_Comm comm, int rank, int nranks, int created,
                          bf_error *local)
{
    int first_failed = created == 0 ? nranks : rank;
    MPI_Allreduce(MPI_IN_PLACE, &first_failed, 1, MPI_INT, MPI_MIN, comm);
    if (first_failed == nranks)
        return 0;
    int permanent = created == BF_TRAIN_PERMANENT;
    MPI_Bcast(&permanent, 1, MPI_INT, first_failed, comm);
    MPI_Bcast(local->msg, (int)sizeof local->msg, MPI_CHAR, first_failed,
              comm);
    if (first_failed != 0) {
        char msg[sizeof local->msg];
        snprintf(msg, sizeof msg, "%s", local->msg);
        bf_error_set(local, NULL, 0, NULL, "rank %d: %s", first_failed, msg);
    }
    return permanent ? TRAIN_SETUP_PERMANENT : TRAIN_SETUP_FAILED;
}

/* Every rank reads the resume checkpoint (from the shared file system on a
 * cluster).  If one of them cannot, all start over, as docs/cluster.md
 * promises, instead of failing every attempt of the job in set-up. */
static const char *agree_on_resume(MPI_Comm comm, int rank,
                                   const char *resume_path)
{
    int readable = !resume_path || access(resume_path, R_OK) == 0;
    MPI_Allreduce(MPI_IN_PLACE, &readable, 1, MPI_INT, MPI_MIN, comm);
    if (readable)
        return resume_path;
    if (rank == 0)
        bf_log_warn("checkpoint %s is not readable on every rank: starting "
                    "the job over", resume_path);
    return NULL;
}

int bf_group_train(MPI_Comm comm, const bf_job_config *cfg,
                   const bf_group_job *job, bf_link *link,
                   bf_train_summary *summary, bf_error *err)
{
    int rank, nranks;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &nranks);
    const char *resume_path = agree_on_resume(comm, rank, job->resume_path);
    hooks_ctx h = { .comm = comm,
                    .link = rank == 0 ? link : NULL };
    bf_trainer_opts opts = {
        .rank = rank, .nranks = nranks,
        .checkpoint_dir = job->checkpoint_dir, .resume_path = resume_path,
        .owner = job->owner, .init_source = job->init_source,
        .memory_budget = job->memory_budget,
        .hooks = { .ctx = &h, .emit = emit_to_link,
                   .should_stop = should_stop,
                   /* One rank has nothing to sum. */
                   .allreduce_sum = nranks > 1 ? allreduce_sum : NULL },
    };
    bf_error local;
    bf_error_clear(&local);
    bf_trainer *t = NULL;
    int created = bf_trainer_create(&t, cfg, &opts, &local);
    int rc = agree_on_setup(comm, rank, nranks, created, &local);
    if (rc == 0 && bf_trainer_run(t, &local) != 0)
        rc = TRAIN_RUN_FAILED;
    if (rc == 0 && summary)
        *summary = *bf_trainer_summary(t);
    bf_trainer_free(t);
    if (rc != 0 && err)
        *err = local;
    return rc;
}

/* ---- the job plan rank 0 broadcasts --------------------------------------- */

/* Waits for a collective without spinning a core (idle ranks). */
static void wait_gently(MPI_Request *req)
{
    int done = 0;
    struct timespec ts = { 0, IDLE_POLL_NS };
    for (MPI_Test(req, &done, MPI_STATUS_IGNORE); !done;
         MPI_Test(req, &done, MPI_STATUS_IGNORE))
        nanosleep(&ts, NULL);
}

/* Rank 0 passes the plan (NULL: stop the group); the other ranks pass NULL
 * and get it (new reference, NULL: stop). */
static json_t *bcast_plan(group *g, const json_t *plan)
{
    char *text = g->rank == 0 && plan ? json_dumps(plan, JSON_COMPACT) : NULL;
    int len = text ? (int)strlen(text) + 1 : 0;
    MPI_Request req;
    MPI_Ibcast(&len, 1, MPI_INT, 0, g->comm, &req);
    wait_gently(&req);
    if (len == 0)
        return NULL;
    if (g->rank != 0)
        text = bf_xmalloc((size_t)len);
    MPI_Bcast(text, len, MPI_CHAR, 0, g->comm);
    json_t *got = g->rank == 0 ? NULL : json_loads(text, 0, NULL);
    free(text);
    return got;
}

/* ---- one job -------------------------------------------------------------- */

static int64_t int_member(const json_t *o, const char *key)
{
    return json_integer_value(json_object_get(o, key));
}

static const char *str_member(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

static int config_from_json(bf_job_config *cfg, const json_t *obj,
                            int64_t job_id, bf_error *err)
{
    char where[64];
    snprintf(where, sizeof where, "job %lld config", (long long)job_id);
    bf_job_config_defaults(cfg);
    if (!json_is_object(obj))
        return bf_error_set(err, where, 0, "config", "must be an object");
    if (bf_job_config_apply_json(cfg, obj, where, NULL, err) != 0)
        return -1;
    return bf_job_config_validate_in(cfg, where, NULL, err);
}

static int make_dir(const char *dir, bf_error *err)
{
    if (mkdir(dir, 0777) == 0 || errno == EEXIST)
        return 0;
    return bf_error_set(err, dir, 0, "checkpoint-dir",
                        "cannot create directory: %s", strerror(errno));
}

/* The job's owner and, for a job of a later stage, its source's (else
 * an empty one: init_from may be any checkpoint), from a job message or a
 * plan.  -1 when the coordinator sent no valid database id. */
static int job_owners(const json_t *o, bf_checkpoint_owner *owner,
                      bf_checkpoint_owner *source, bf_error *err)
{
    const char *db = str_member(o, "database_id");
    int64_t src = int_member(o, "source_job_id");
    memset(source, 0, sizeof *source);
    if (bf_checkpoint_owner_set(owner, db, int_member(o, "job_id"), err) != 0)
        return -1;
    return src > 0 ? bf_checkpoint_owner_set(source, db, src, err) : 0;
}

/* DIR/db-<database id>/job-<id>: attempts of one job share it; different
 * jobs never do, even of databases whose groups share DIR. */
static int job_checkpoint_dir(const group *g, const bf_checkpoint_owner *o,
                              char *dir, size_t cap, bf_error *err)
{
    dir[0] = '\0';
    if (!g->checkpoint_root[0])
        return 0;
    /* checkpoint_root leaves room for both: n < cap */
    int n = snprintf(dir, cap, "%s/db-%s", g->checkpoint_root,
                     o->database_id);
    if (make_dir(dir, err) != 0)
        return -1;
    snprintf(dir + n, cap - (size_t)n, "/job-%lld", (long long)o->job_id);
    return make_dir(dir, err);
}

static int resolve_checkpoint_root(group *g, bf_error *err)
{
    const char *dir = g->o.checkpoint_dir;
    if (!dir)
        return 0;
    char abs[PATH_MAX];
    if (make_dir(dir, err) != 0)
        return -1;
    if (!realpath(dir, abs) || strlen(abs) >= sizeof g->checkpoint_root)
        return bf_error_set(err, dir, 0, "checkpoint-dir",
                            "cannot resolve the directory: %s",
                            strerror(errno ? errno : ENAMETOOLONG));
    snprintf(g->checkpoint_root, sizeof g->checkpoint_root, "%s", abs);
    return 0;
}

/* Where a re-leased job continues: the checkpoint the coordinator recorded,
 * and no other newer one.  The link reports a checkpoint only after every
 * record before it was acknowledged, so resuming there can never skip a
 * record that was not stored; a newer file in the directory carries no
 * such promise.  An older file of the job does: its records came before
 * the recorded one's.  Without a loadable one the job starts over, which
 * is always safe: training is a pure function of the config, so re-sent
 * steps carry the values the store already has.  "" means a fresh start. */

static int step_desc(const void *a, const void *b)
{
    return *(const int *)b - *(const int *)a;
}

/* Steps of the step-NNNNNN.safetensors files in dir below `below`, newest
 * first, into steps[cap]; returns how many. */
static int older_checkpoints(const char *dir, int below, int *steps, int cap)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < cap) {
        int step, end = 0;
        if (sscanf(e->d_name, "step-%d.safetensors%n", &step, &end) == 1
            && e->d_name[end] == '\0' && end > 0 && step >= 0 && step < below)
            steps[n++] = step;
    }
    closedir(d);
    qsort(steps, (size_t)n, sizeof *steps, step_desc);
    return n;
}

/* The recorded checkpoint would not load: renamed to PATH.bad (so no scan
 * picks it again) and reported, so no later attempt is handed it. */
static void mark_bad(group *g, int64_t job_id, const char *path,
                     const char *why)
{
    char bad[BF_PATH_MAX + 80];
    snprintf(bad, sizeof bad, "%s.bad", path);
    bf_log_error("job %lld: checkpoint %s cannot be loaded (%s); renamed to "
                 "%s", (long long)job_id, path, why, bad);
    if (rename(path, bad) != 0)
        bf_log_warn("job %lld: cannot rename %s: %s", (long long)job_id, path,
                    strerror(errno));
    bf_link_checkpoint_bad(g->link, path, why);
}

/* The newest loadable checkpoint of the job in dir older than step, told to
 * the coordinator as the job's checkpoint; "" when there is none. */
static void fall_back(group *g, const bf_checkpoint_owner *owner,
                      const bf_job_config *cfg, const char *dir, int step,
                      char *path, size_t cap)
{
    int64_t job_id = owner->job_id;
    int steps[1024];
    int n = dir[0] ? older_checkpoints(dir, step, steps,
                                       (int)(sizeof steps / sizeof *steps))
                   : 0;
    for (int i = 0; i < n; i++) {
        bf_error err;
        bf_checkpoint_step_path(path, cap, dir, steps[i]);
        if (bf_checkpoint_check_resume(path, cfg, owner, NULL, &err) != 0) {
            mark_bad(g, job_id, path, err.msg);
            continue;
        }
        bf_log_warn("job %lld: falling back to the older checkpoint %s",
                    (long long)job_id, path);
        bf_record record = {.kind = BF_RECORD_CHECKPOINT, .step = steps[i],
                            .u.checkpoint.path = path};
        bf_link_emit(g->link, &record);
        return;
    }
    path[0] = '\0';
    bf_log_warn("job %lld: no loadable checkpoint: starting over at step 0",
                (long long)job_id);
}

/* -1 (err set) when the recorded checkpoint is another job's: it is not
 * this job's to rename, and every attempt would find it again. */
static int find_resume(group *g, const json_t *job,
                       const bf_checkpoint_owner *owner,
                       const bf_job_config *cfg, const char *dir, char *path,
                       size_t cap, bf_error *err)
{
    path[0] = '\0';
    const char *recorded = str_member(job, "resume_checkpoint");
    if (!recorded)
        return 0;
    if (access(recorded, F_OK) != 0) {
        /* Not bad, only elsewhere (another machine's disk). */
        bf_log_warn("recorded checkpoint %s is not readable here (%s): "
                    "starting the job over", recorded, strerror(errno));
        return 0;
    }
    int rc = bf_checkpoint_check_resume(recorded, cfg, owner, NULL, err);
    if (rc == BF_CHECKPOINT_FOREIGN)
        return -1;
    if (rc == 0) {
        snprintf(path, cap, "%s", recorded);
        return 0;
    }
    mark_bad(g, owner->job_id, recorded, err->msg);
    fall_back(g, owner, cfg, dir, (int)int_member(job, "resume_step"), path,
              cap);
    return 0;
}

/* Tells the coordinator how the attempt ended: done (error NULL) or failed,
 * for good when permanent (no other attempt would do better). */
static void report(group *g, int64_t job_id, const char *error, int permanent)
{
    bf_link_report(g->link, job_id, error, permanent, -1);
}

/* Reports a run that ended early (or not), as the reason requires.  Returns
 * 1 when a signal stopped it: the group stops too. */
static int report_outcome(group *g, int64_t job_id,
                           const bf_train_summary *s, double seconds,
                           const bf_job_config *cfg)
{
    int state = bf_link_attempt_state(g->link);
    if (s->diverged) {
        /* The records up to and including the diverged step go first
         * (bf_link_finish_attempt waits for their acks). */
        char why[64];
        snprintf(why, sizeof why, "diverged at step %d", s->diverged);
        bf_log_warn("job %lld: %s", (long long)job_id, why);
        report(g, job_id, why, 0);
    } else if (!s->stopped) {
        double tokens = (double)s->step * cfg->batch_size * cfg->seq_len;
        bf_log_info("job %lld: done at step %d, train loss %.6g "
                    "(%.1f s, %.0f tokens/s over the whole attempt)",
                    (long long)job_id, s->step, s->train_loss, seconds,
                    seconds > 0 ? tokens / seconds : 0.0);
        report(g, job_id, NULL, 0);
    } else if (state == BF_LINK_FENCED) {
        bf_log_warn("job %lld: stopped at step %d: lease lost",
                    (long long)job_id, s->step);
        report(g, job_id, NULL, 0);   /* sends nothing: the lease is gone */
    } else if (state == BF_LINK_CANCELLED) {
        bf_log_info("job %lld: stopped at step %d: cancelled",
                    (long long)job_id, s->step);
        report(g, job_id, "cancelled", 0);
    } else {
        char why[64];
        snprintf(why, sizeof why, "worker stopped by a signal at step %d",
                 s->step);
        bf_log_info("job %lld: %s", (long long)job_id, why);
        report(g, job_id, why, 0);
        return 1;
    }
    return 0;
}

/* What every rank trains a job with besides its config, from the plan's
 * fields (a NULL or "" path: none). */
static bf_group_job group_job(const group *g, const char *dir,
                              const char *resume,
                              const bf_checkpoint_owner *owner,
                              const bf_checkpoint_owner *source)
{
    return (bf_group_job){ .checkpoint_dir = dir && dir[0] ? dir : NULL,
                           .resume_path = resume && resume[0] ? resume : NULL,
                           .owner = owner, .init_source = source,
                           .memory_budget = g->memory_budget };
}

/* Rank 0: runs one leased job with the whole group and reports it.  Returns
 * 1 when the group should stop. */
static int run_leased_job(group *g, const json_t *job)
{
    int64_t job_id = int_member(job, "job_id");
    int64_t attempt = int_member(job, "attempt_id");
    bf_link_begin_attempt(g->link, attempt,
                          (int)int_member(job, "lease_seconds"));
    bf_log_info("job %lld: leased as attempt %lld (#%lld) of sweep %lld",
                (long long)job_id, (long long)attempt,
                (long long)int_member(job, "attempt_no"),
                (long long)int_member(job, "sweep_id"));

    bf_error err;
    bf_error_clear(&err);
    bf_job_config cfg;
    bf_checkpoint_owner owner, source;
    char dir[BF_PATH_MAX], resume[BF_PATH_MAX + 64];
    json_t *config = json_object_get(job, "config");
    /* A config this worker cannot take, or another job's checkpoint where
     * this one's should be, fails the job for good; a checkpoint directory
     * it cannot make (or a coordinator without database ids) is this
     * worker's trouble only. */
    int permanent = config_from_json(&cfg, config, job_id, &err) != 0;
    if (permanent || job_owners(job, &owner, &source, &err) != 0 ||
        job_checkpoint_dir(g, &owner, dir, sizeof dir, &err) != 0 ||
        (permanent = find_resume(g, job, &owner, &cfg, dir, resume,
                                 sizeof resume, &err) != 0)) {
        bf_log_error("job %lld: %s", (long long)job_id, err.msg);
        report(g, job_id, err.msg, permanent);
        return 0;
    }
    if (resume[0])
        bf_log_info("job %lld: resuming from %s", (long long)job_id, resume);

    json_t *plan = json_pack("{s:O, s:s, s:s, s:s, s:I, s:I}", "config",
                             config, "checkpoint_dir", dir, "resume", resume,
                             "database_id", owner.database_id,
                             "job_id", (json_int_t)job_id, "source_job_id",
                             (json_int_t)source.job_id);
    bcast_plan(g, plan);
    json_decref(plan);

    double t0 = bf_now_seconds();
    bf_train_summary s;
    bf_group_job gj = group_job(g, dir, resume, &owner, &source);
    int rc = bf_group_train(g->comm, &cfg, &gj, g->link, &s, &err);
    if (rc == TRAIN_SETUP_FAILED || rc == TRAIN_SETUP_PERMANENT) {
        bf_log_error("job %lld: %s", (long long)job_id, err.msg);
        report(g, job_id, err.msg, rc == TRAIN_SETUP_PERMANENT);
        return 0;
    }
    if (rc == TRAIN_RUN_FAILED) {
        /* The other ranks are already inside the next step's collective:
         * the group cannot go on.  Report, then take it down. */
        bf_log_error("job %lld: %s; stopping the group", (long long)job_id,
                     err.msg);
        report(g, job_id, err.msg, 0);
        MPI_Abort(g->comm, EXIT_RUNTIME);
        return 1;
    }
    return report_outcome(g, job_id, &s, bf_now_seconds() - t0, &cfg);
}

/* Ranks other than 0: train whatever rank 0 broadcasts, until it says stop. */
static void follow(group *g)
{
    json_t *plan;
    while ((plan = bcast_plan(g, NULL)) != NULL) {
        bf_job_config cfg;
        bf_error err;
        bf_error_clear(&err);
        bf_checkpoint_owner owner, source;
        const char *dir = str_member(plan, "checkpoint_dir");
        const char *resume = str_member(plan, "resume");
        if (config_from_json(&cfg, json_object_get(plan, "config"), 0,
                             &err) != 0 ||
            job_owners(plan, &owner, &source, &err) != 0) {
            /* Rank 0 validated the same plan: this cannot differ. */
            bf_log_error("rank %d: %s", g->rank, err.msg);
            MPI_Abort(g->comm, EXIT_RUNTIME);
        }
        bf_group_job gj = group_job(g, dir, resume, &owner, &source);
        if (bf_group_train(g->comm, &cfg, &gj, NULL, NULL, &err) ==
            TRAIN_RUN_FAILED) {
            bf_log_error("rank %d: %s", g->rank, err.msg);
            MPI_Abort(g->comm, EXIT_RUNTIME);
        }
        json_decref(plan);
    }
}

/* --exit-when-idle's clock: it runs while the coordinator has no job and
 * none pending; a pending one (a later stage's, a held seed, waiting on
 * jobs running now) stops it, or a group would give its nodes back while
 * the work it could take is about to be released. */
typedef struct idle_clock {
    double since;       /* since when, or -1: not running */
    int told_pending;   /* the "staying" line is logged once a spell */
} idle_clock;

/* After a no_job: whether the group exits now (--exit-when-idle). */
static int idle_exit(const group *g, idle_clock *c, const bf_link_no_job *none)
{
    if (none->pending) {
        if (g->o.exit_when_idle && !c->told_pending)
            bf_log_info("no job now, but jobs wait on jobs running: staying "
                        "(--exit-when-idle)");
        *c = (idle_clock){.since = -1, .told_pending = 1};
        return 0;
    }
    c->told_pending = 0;
    if (c->since < 0)
        c->since = bf_now_seconds();
    if (!g->o.exit_when_idle ||
        bf_now_seconds() - c->since < g->o.idle_grace_s)
        return 0;
    bf_log_info("no job for %d s: exiting (--exit-when-idle)",
                g->o.idle_grace_s);
    return 1;
}

/* Rank 0: the job loop. */
static int lead(group *g)
{
    int jobs = 0;
    int status = 0;
    idle_clock idle = {.since = -1};
    while (!stop_signal && (g->o.max_jobs == 0 || jobs < g->o.max_jobs)) {
        json_t *job = NULL;
        bf_link_no_job none;
        bf_error err;
        bf_error_clear(&err);
        int got = bf_link_request_job(g->link, &job, &none, &err);
        if (got == BF_LINK_INTERRUPTED)
            break;
        if (got == BF_LINK_ERR) {
            bf_log_error("%s", err.msg);
            status = EXIT_RUNTIME;
            break;
        }
        if (got == 0) {
            if (idle_exit(g, &idle, &none))
                break;
            bf_link_sleep(g->link, none.retry_ms);   /* early on a signal */
            continue;
        }
        idle = (idle_clock){.since = -1};
        jobs++;
        int stop = run_leased_job(g, job);
        json_decref(job);
        if (stop)
            break;
    }
    if (stop_signal)
        bf_log_info("stopping on signal %d", stop_signal);
    bcast_plan(g, NULL);
    return status;
}

/* ---- the program ---------------------------------------------------------- */

int bf_group_requested(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--server") == 0 ||
            strncmp(argv[i], "--server=", 9) == 0)
            return 1;
    return 0;
}

/* Parses argv into o; prints (when loud) and returns EXIT_USAGE on errors,
 * -1 for --help, 0 otherwise. */
static int parse_options(int argc, char **argv, group_opts *o, int loud)
{
    const char *log_level = NULL;
    const bf_option options[] = {
        BF_OPT_STR("server", "HOST:PORT", &o->server),
        BF_OPT_STR("token-file", "FILE", &o->token_file),
        BF_OPT_STR("checkpoint-dir", "DIR", &o->checkpoint_dir),
        BF_OPT_STR("name", "NAME", &o->name),
        BF_OPT_INT("max-jobs", "N", &o->max_jobs, 1, INT_MAX),
        BF_OPT_FLAG("exit-when-idle", &o->exit_when_idle),
        BF_OPT_INT("idle-grace", "S", &o->idle_grace_s, 0, INT_MAX),
        BF_OPT_INT("memory-budget", "MIB", &o->memory_budget_mib, 1, INT_MAX),
        BF_OPT_STR("log-level", "LEVEL", &log_level),
        BF_OPT_END,
    };
    bf_args a = { .prog = "bifocal-worker", .options = options,
                  .quiet = !loud };
    int rc = bf_args_parse(&a, argc, argv);
    if (rc == BF_ARGS_HELP) {
        if (loud)
            fputs(usage_text, stdout);
        return -1;
    }
    if (rc != BF_ARGS_OK)
        return EXIT_USAGE;
    const char *problem = NULL;
    int level = log_level ? bf_log_level_from_name(log_level) : BF_LOG_INFO;
    if (level < 0)
        problem = "--log-level is debug, info, warn or error";
    else if (!o->server)
        problem = "--server HOST:PORT is required";
    else if (!o->token_file)
        problem = "--token-file FILE is required";
    if (problem) {
        if (loud)
            fprintf(stderr, "bifocal-worker: %s\n%s", problem, usage_text);
        return EXIT_USAGE;
    }
    if (loud && log_level)
        bf_log_set_level((bf_log_level)level);
    return 0;
}

/* The bytes each rank may allocate: --memory-budget, else this node's
 * memory (physical, or its cgroup's limit where less: bf_mem_limit)
 * shared by its ranks (collective when no option). */
static size_t rank_memory_budget(const group *g)
{
    if (g->o.memory_budget_mib > 0)
        return (size_t)g->o.memory_budget_mib << 20;
    MPI_Comm node;
    int on_node = 1;
    MPI_Comm_split_type(g->comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL,
                        &node);
    MPI_Comm_size(node, &on_node);
    MPI_Comm_free(&node);
    return bf_mem_limit() / (size_t)on_node;
}

/* Rank 0: reads the token and connects. */
static int open_link(group *g, const char *name, bf_error *err)
{
    char token[BF_TOKEN_HEX_LEN + 1], host[256] = "";
    if (bf_wire_read_token(g->o.token_file, token, sizeof token, err) != 0)
        return -1;
    gethostname(host, sizeof host - 1);
    bf_link_opts lo = { .server = g->o.server, .token = token,
                        .name = name, .host = host, .ranks = g->nranks,
                        .interrupt = &stop_signal };
    return bf_link_start(&g->link, &lo, err);
}

static int run_group(group *g)
{
    if (g->rank != 0) {
        catch_signals(NULL);
        follow(g);
        return 0;
    }
    char name[320], host[256] = "";
    gethostname(host, sizeof host - 1);
    if (g->o.name)
        snprintf(name, sizeof name, "%s", g->o.name);
    else
        snprintf(name, sizeof name, "%s:%ld", host, (long)getpid());
    bf_error err;
    bf_error_clear(&err);
    if (resolve_checkpoint_root(g, &err) != 0 ||
        open_link(g, name, &err) != 0) {
        bf_log_error("%s", err.msg);
        bcast_plan(g, NULL);
        return EXIT_RUNTIME;
    }
    catch_signals(g->link);
    bf_log_info("worker group %s: %d rank%s, coordinator %s, engine "
                "kernels %s, OpenBLAS %s", name, g->nranks,
                g->nranks == 1 ? "" : "s", g->o.server,
                bf_isa_name(bf_isa_current()), bf_isa_blas_core_in_use());
    int status = lead(g);
    catch_signals(NULL);
    bf_link_stop(g->link);
    g->link = NULL;
    return status;
}

int bf_group_main(int argc, char **argv)
{
    int provided;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) !=
        MPI_SUCCESS) {
        fprintf(stderr, "bifocal-worker: MPI_Init failed\n");
        return EXIT_RUNTIME;
    }
    group g = { .comm = MPI_COMM_WORLD,
                .o = { .idle_grace_s = DEFAULT_IDLE_GRACE_S } };
    MPI_Comm_rank(g.comm, &g.rank);
    MPI_Comm_size(g.comm, &g.nranks);
    if (g.rank != 0)
        bf_log_set_level(BF_LOG_ERROR);   /* rank 0 speaks for the group */
    /* Writes to a vanished coordinator must fail, not kill us. */
    signal(SIGPIPE, SIG_IGN);
    int status = parse_options(argc, argv, &g.o, g.rank == 0);
    if (status == 0) {
        g.memory_budget = rank_memory_budget(&g);
        status = run_group(&g);
    }
    MPI_Finalize();
    if (status == 0 && stop_signal)
        bf_log_info("stopped by signal %d", stop_signal);
    return status < 0 ? 0 : status;
}
