/* The PyTorch trainer (python/bifocal_torch.py) under a real
 * `bifocal-worker --exec` against a real bifocald: a 200-step job stores
 * every record once; a worker killed with SIGKILL mid-job takes its
 * trainer with it, and the next worker resumes from the recorded
 * checkpoint with no row above it left from the dead attempt; and a mixed
 * fleet, one builtin group and one torch worker on one coordinator, trains
 * a sweep whose grid crosses `trainer` with `rope`, which `bifocal
 * compare` then compares trainer against trainer.
 *
 * Needs Debian's python3-torch at /usr/bin/python3 (scripts/deps.sh);
 * without it the test fails saying so. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <glob.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "e2e.h"

#define PYTHON "/usr/bin/python3"

/* A tiny model, so that a step is a few milliseconds. */
#define TINY "d_model: 16, n_layers: 1, n_heads: 2, seq_len: 24, depth: 3,\n" \
    "  eval_depths: [3], batch_size: 4, eval_examples: 16"

/* `PYTHON bifocal_torch.py --threads 1` as --exec takes it: the trainer
 * finds bifocal-worker as its parent. */
static const char *torch_cmd(void)
{
    static char cmd[1024];
    snprintf(cmd, sizeof cmd, PYTHON " %s/python/bifocal_torch.py --threads 1",
             bft_env_path("BF_SOURCE_ROOT"));
    return cmd;
}

static pid_t start_torch_worker(bft_daemon *d, const char *tag)
{
    pid_t w = e2e_exec_start(d, tag, "--exec", torch_cmd(), "--trainer",
                             "torch", "--grace", "5", "--exit-when-idle",
                             "--idle-grace", "0", NULL);
    assert_true(w > 0);
    return w;
}

static int torch_setup(void **state)
{
    if (system(PYTHON " -c 'import torch' 2>/dev/null") != 0) {
        fprintf(stderr, "test_e2e_torch: " PYTHON " cannot import torch: "
                "install Debian's python3-torch (scripts/deps.sh)\n");
        return -1;   /* cmocka fails the test */
    }
    return e2e_setup(state);
}

/* Starts the daemon (a lease of lease_s seconds) and submits a sweep. */
static long long submit(bft_daemon *d, int lease_s, const char *name,
                        const char *body)
{
    assert_int_equal(bft_daemon_start(d, lease_s), 0);
    char yaml[2048], file[64];
    snprintf(yaml, sizeof yaml, "name: %s\n%s", name, body);
    snprintf(file, sizeof file, "%s.yaml", name);
    long long sweep = bft_submit(d, file, yaml, NULL, NULL);
    assert_true(sweep > 0);
    return sweep;
}

static long long sql_of(bft_daemon *d, const char *fmt, long long a)
{
    char sql[768];
    snprintf(sql, sizeof sql, fmt, a);
    return bft_sql_int(d, sql);
}

/* The attempt directories of job_id, sorted (attempt ids grow). */
static void attempt_dirs(bft_daemon *d, long long job_id, glob_t *g)
{
    char pattern[600];
    snprintf(pattern, sizeof pattern, "%s/exec/db-*/job-%lld/attempt-*",
             d->dir, job_id);
    assert_int_equal(glob(pattern, 0, NULL, g), 0);
}

/* The records of `type` in dir's records.jsonl: their steps and, when
 * tps is not NULL, their tokens_per_s; how many (at most cap). */
static int read_records(const char *dir, const char *type, int *steps,
                        double *tps, int cap)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/records.jsonl", dir);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof line, f) && n < cap) {
        json_t *r = json_loads(line, 0, NULL);
        const char *t = json_string_value(json_object_get(r, "type"));
        if (t && strcmp(t, type) == 0) {
            steps[n] = (int)json_integer_value(json_object_get(r, "step"));
            if (tps)
                tps[n] = json_real_value(json_object_get(r, "tokens_per_s"));
            n++;
        }
        json_decref(r);
    }
    fclose(f);
    return n;
}

/* Live processes (zombies aside) whose working directory is dir, each
 * sent sig (0: none): the trainer and its data reader run in its
 * attempt's directory. */
static int processes_in(const char *dir, int sig)
{
    char real[PATH_MAX];
    if (!realpath(dir, real))
        return 0;
    DIR *proc = opendir("/proc");
    struct dirent *de;
    int n = 0;
    while (proc && (de = readdir(proc)) != NULL) {
        char link[300], cwd[PATH_MAX], stat[300], line[512];
        if (de->d_name[0] < '0' || de->d_name[0] > '9')
            continue;
        snprintf(link, sizeof link, "/proc/%s/cwd", de->d_name);
        ssize_t len = readlink(link, cwd, sizeof cwd - 1);
        if (len <= 0)
            continue;
        cwd[len] = '\0';
        if (strcmp(cwd, real) != 0)
            continue;
        snprintf(stat, sizeof stat, "/proc/%s/stat", de->d_name);
        FILE *f = fopen(stat, "r");
        char *paren = f && fgets(line, sizeof line, f) ? strrchr(line, ')')
                                                       : NULL;
        if (f)
            fclose(f);
        if (paren && paren[1] == ' ' && paren[2] != 'Z') {
            n++;
            if (sig)
                kill(atoi(de->d_name), sig);
        }
    }
    if (proc)
        closedir(proc);
    return n;
}

/* (a) Every record of a 200-step job stored once. */
static void test_torch_job_stored_once(void **state)
{
    bft_daemon *d = *state;
    long long sweep = submit(d, 10, "torch200", "max_attempts: 1\n"
                             "base: {trainer: torch, rope: bifocal,\n"
                             "  " TINY ",\n"
                             "  steps: 200, warmup_steps: 10, log_every: 1,\n"
                             "  eval_every: 50, freq_every: 100,\n"
                             "  checkpoint_every: 100}\n");
    assert_int_equal(e2e_group_wait(start_torch_worker(d, "torch"), 120000),
                     0);
    const char *jobs = "FROM jobs WHERE sweep_id = %lld";
    char q[600];
    snprintf(q, sizeof q, "SELECT count(*) %s AND status = 'succeeded' AND "
             "attempts = 1", jobs);
    assert_int_equal(sql_of(d, q, sweep), 1);
    const char *per_job = "SELECT count(*) FROM %s t JOIN jobs j USING "
                          "(job_id) WHERE j.sweep_id = %%lld%s";
    snprintf(q, sizeof q, per_job, "metrics", " AND t.key = 'loss'");
    assert_int_equal(sql_of(d, q, sweep), 200);
    snprintf(q, sizeof q, per_job, "metrics", " AND t.key = 'loss' AND "
             "t.step BETWEEN 1 AND 200 GROUP BY j.job_id HAVING "
             "count(DISTINCT t.step) = 200");
    assert_int_equal(sql_of(d, q, sweep), 200);
    snprintf(q, sizeof q, per_job, "metrics", "");
    assert_int_equal(sql_of(d, q, sweep), 4 * 200);  /* 4 keys a step */
    snprintf(q, sizeof q, per_job, "evals", "");
    assert_int_equal(sql_of(d, q, sweep), 4);
    snprintf(q, sizeof q, per_job, "eval_outcomes", "");
    assert_int_equal(sql_of(d, q, sweep), 4);
    /* every head at 0 and 200, the one learnable head at 100: a row for
     * each of a head's 4 pairs */
    snprintf(q, sizeof q, per_job, "frequencies", "");
    assert_int_equal(sql_of(d, q, sweep), (2 + 1 + 2) * 4);
    snprintf(q, sizeof q, "SELECT checkpoint_step %s AND checkpoint_path "
             "GLOB '*/attempt-*/checkpoints/step-000200.safetensors'", jobs);
    assert_int_equal(sql_of(d, q, sweep), 200);
}

#define KILL_STEPS 1000

/* (b) SIGKILL to the worker mid-job: its trainer dies with it; the next
 * worker resumes from the recorded checkpoint, and every row above it is
 * the new attempt's. */
static void test_torch_worker_killed(void **state)
{
    bft_daemon *d = *state;
    char body[1024];
    snprintf(body, sizeof body, "max_attempts: 2\n"
             "base: {trainer: torch, rope: spectral, " TINY ",\n"
             "  steps: %d, warmup_steps: 10, log_every: 1,\n"
             "  eval_every: 500, freq_every: 500, checkpoint_every: 100}\n",
             KILL_STEPS);
    long long sweep = submit(d, 2, "killed", body);
    long long job = sql_of(d, "SELECT job_id FROM jobs WHERE sweep_id = %lld",
                           sweep);
    pid_t w = start_torch_worker(d, "first");

    /* Past its second checkpoint, the trainer is frozen (SIGSTOP), so that
     * no checkpoint comes between what the store holds and the kill; once
     * all it wrote is stored, rows past the stored checkpoint must exist,
     * else it froze on a checkpoint: thawed a moment, and again. */
    char q[600];
    snprintf(q, sizeof q, "SELECT count(*) FROM jobs WHERE job_id = %lld "
             "AND checkpoint_step >= 200", job);
    assert_int_equal(e2e_wait_sql(d, q, 1, 120000), 1);   /* a hang guard */
    glob_t dirs;
    attempt_dirs(d, job, &dirs);
    assert_int_equal(dirs.gl_pathc, 1);
    char dead[PATH_MAX];
    snprintf(dead, sizeof dead, "%s", dirs.gl_pathv[0]);
    globfree(&dirs);
    static int steps[KILL_STEPS];
    static double tps[KILL_STEPS];
    int beyond = 0;
    for (int tries = 0; tries < 100 && !beyond; tries++) {
        processes_in(dead, SIGSTOP);
        int n = read_records(dead, "train", steps, tps, KILL_STEPS);
        assert_true(n > 0 && steps[n - 1] < KILL_STEPS);
        snprintf(q, sizeof q, "SELECT count(*) FROM metrics WHERE job_id = "
                 "%lld AND key = 'loss' AND step = %d", job, steps[n - 1]);
        assert_int_equal(e2e_wait_sql(d, q, 1, 60000), 1);  /* all stored */
        static int ck[KILL_STEPS];
        int k = read_records(dead, "checkpoint", ck, NULL, KILL_STEPS);
        snprintf(q, sizeof q, "SELECT count(*) FROM jobs WHERE job_id = %lld "
                 "AND checkpoint_step = %d", job, k ? ck[k - 1] : -1);
        assert_int_equal(e2e_wait_sql(d, q, 1, 60000), 1);
        snprintf(q, sizeof q, "SELECT count(*) FROM metrics m, jobs j WHERE "
                 "j.job_id = %lld AND m.job_id = j.job_id AND m.key = 'loss' "
                 "AND m.step > j.checkpoint_step", job);
        beyond = bft_sql_int(d, q) > 0;
        if (!beyond) {
            processes_in(dead, SIGCONT);
            usleep(20000);
        }
    }
    assert_true(beyond);
    kill(w, SIGKILL);
    e2e_group_wait(w, 60000);
    processes_in(dead, SIGCONT);    /* the frozen ones meet their end */
    for (int i = 0; i < 1000 && processes_in(dead, 0); i++)  /* hang guard */
        usleep(10000);
    assert_int_equal(processes_in(dead, 0), 0);   /* PDEATHSIG took it */

    long long resume = sql_of(d, "SELECT checkpoint_step FROM jobs WHERE "
                              "job_id = %lld", job);
    assert_true(resume >= 200 && resume < KILL_STEPS);
    /* The dead attempt's rows reach past the checkpoint... */
    snprintf(q, sizeof q, "SELECT count(*) FROM metrics WHERE job_id = %lld "
             "AND step > %lld", job, resume);
    assert_true(bft_sql_int(d, q) > 0);

    /* ...and the next attempt's replace them, once the lease expired. */
    assert_int_equal(sql_of(d, "SELECT count(*) FROM jobs WHERE job_id = "
                            "%lld AND status = 'running'", job), 1);
    snprintf(q, sizeof q, "SELECT count(*) FROM jobs WHERE job_id = %lld "
             "AND status = 'queued'", job);
    assert_int_equal(e2e_wait_sql(d, q, 1, 60000), 1);   /* a hang guard */
    assert_int_equal(e2e_group_wait(start_torch_worker(d, "second"), 120000),
                     0);
    assert_int_equal(sql_of(d, "SELECT count(*) FROM jobs WHERE job_id = "
                            "%lld AND status = 'succeeded' AND attempts = 2",
                            job), 1);
    attempt_dirs(d, job, &dirs);
    assert_int_equal(dirs.gl_pathc, 2);
    int n = read_records(dirs.gl_pathv[1], "train", steps, tps,
                         KILL_STEPS);
    /* it resumed at the recorded step */
    assert_int_equal(n, KILL_STEPS - resume);
    assert_int_equal(steps[0], resume + 1);
    assert_int_equal(steps[n - 1], KILL_STEPS);
    /* the dead attempt had written train records past it too */
    int dead_steps[KILL_STEPS];
    double dead_tps[KILL_STEPS];
    int m = read_records(dead, "train", dead_steps, dead_tps, KILL_STEPS);
    assert_true(m > 0 && dead_steps[m - 1] > resume);
    globfree(&dirs);
    /* Every stored step above the checkpoint is the new attempt's: its
     * throughput (which no two attempts share) is the one the new
     * attempt wrote. */
    for (int i = 0; i < n; i++) {
        char sql[256], text[64];
        snprintf(sql, sizeof sql, "SELECT printf('%%.17g', value) FROM "
                 "metrics WHERE job_id = %lld AND key = 'tokens_per_s' AND "
                 "step = %d", job, steps[i]);
        e2e_sql_text(d, sql, text, sizeof text);
        double stored = strtod(text, NULL);
        if (fabs(stored - tps[i]) > 1e-9 * fabs(tps[i])) {
            fprintf(stderr, "step %d: tokens_per_s %s stored, %.17g in the "
                    "new attempt's records\n", steps[i], text, tps[i]);
            fail();
        }
    }
    snprintf(q, sizeof q, "SELECT count(*) FROM metrics WHERE job_id = %lld "
             "AND key = 'loss'", job);
    assert_int_equal(bft_sql_int(d, q), KILL_STEPS);
}

/* Both trainers crossed with two encodings, two seeds each. */
static const char mixed_sweep[] =
    "max_attempts: 1\n"
    "base: {task: dyck, " TINY ",\n"
    "  steps: 40, warmup_steps: 4, log_every: 10, eval_every: 20}\n"
    "grid: {trainer: [builtin, torch], rope: [rope, spectral],\n"
    "       seed: [1, 2]}\n";

/* (c) One builtin group and one torch worker on one coordinator. */
static void test_mixed_fleet(void **state)
{
    bft_daemon *d = *state;
    long long sweep = submit(d, 10, "mixed", mixed_sweep);
    assert_int_equal(sql_of(d, "SELECT count(*) FROM jobs WHERE sweep_id = "
                            "%lld", sweep), 8);
    pid_t g = e2e_group_start(d, 1, "builtin", "--exit-when-idle",
                              "--idle-grace", "0", NULL);
    pid_t w = start_torch_worker(d, "torch");
    assert_true(g > 0);
    assert_int_equal(e2e_group_wait(g, 120000), 0);
    assert_int_equal(e2e_group_wait(w, 120000), 0);
    assert_int_equal(sql_of(d, "SELECT count(*) FROM jobs WHERE sweep_id = "
                            "%lld AND status = 'succeeded'", sweep), 8);
    assert_int_equal(sql_of(d, "SELECT count(*) FROM jobs WHERE sweep_id = "
                            "%lld AND trainer = 'torch' AND status = "
                            "'succeeded'", sweep), 4);

    /* `bifocal compare SWEEP --db DB` and through the daemon alike */
    char cmd[1024], out[16384];
    snprintf(cmd, sizeof cmd, "%s compare %lld --db %s --baseline "
             "trainer=builtin --verbose",
             bft_env_path("BIFOCAL"), sweep, d->db);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t len = fread(out, 1, sizeof out - 1, p);
    out[len] = '\0';
    assert_int_equal(pclose(p), 0);
    fputs(out, stderr);
    assert_non_null(strstr(out, "trainer=torch vs trainer=builtin"));
    char id[32], *served = NULL;
    snprintf(id, sizeof id, "%lld", sweep);
    assert_int_equal(bft_run_client(d, &served, NULL, "compare", id,
                                    "--baseline", "trainer=builtin",
                                    "--verbose", NULL),
                     0);
    fputs(served, stderr);
    assert_non_null(strstr(served, "trainer=torch vs trainer=builtin"));
    free(served);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_torch_job_stored_once,
                                        torch_setup, e2e_teardown),
        cmocka_unit_test_setup_teardown(test_torch_worker_killed,
                                        torch_setup, e2e_teardown),
        cmocka_unit_test_setup_teardown(test_mixed_fleet, torch_setup,
                                        e2e_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
