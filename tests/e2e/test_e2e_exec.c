/* `bifocal-worker --exec CMD --trainer NAME` with a real bifocald and the
 * stdlib-only fake trainer tests/e2e/fake_trainer.py: every record of a
 * 200-step job stored once, builtin and exec jobs never cross, how an
 * attempt's end maps to the job's (exit 0 without done and a crash are
 * retried, a fail record is final, a malformed line is an error naming
 * it), and a cancel ends the trainer's whole tree, an orphan in a session
 * of its own too, with SIGKILL for what ignores SIGTERM; so do SIGTERM
 * to the worker and a coordinator gone for longer than the lease. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <glob.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "e2e.h"

/* A job of trainer `fake`; the fake trainer reads these fields. */
#define EXEC_BASE "base: {trainer: fake, steps: %d, warmup_steps: 0,\n" \
    "       log_every: 1,\n"                                            \
    "       eval_every: 50, freq_every: 100, checkpoint_every: 100,\n"  \
    "       eval_examples: 16}\n"

static long long submit_exec(bft_daemon *d, const char *name, int steps,
                             int max_attempts)
{
    char yaml[512], file[64];
    snprintf(yaml, sizeof yaml, "name: %s\nmax_attempts: %d\n" EXEC_BASE,
             name, max_attempts, steps);
    snprintf(file, sizeof file, "%s.yaml", name);
    long long sweep = bft_submit(d, file, yaml, NULL, NULL);
    assert_true(sweep > 0);
    return sweep;
}

static long long submit_builtin(bft_daemon *d, const char *name)
{
    char yaml[512], file[64];
    snprintf(yaml, sizeof yaml, "name: %s\nbase: {d_model: 32, n_layers: 1, "
             "n_heads: 2, seq_len: 40, batch_size: 8, steps: 20,\n"
             "  warmup_steps: 2, log_every: 10, eval_every: 0, "
             "eval_examples: 16}\n", name);
    snprintf(file, sizeof file, "%s.yaml", name);
    return bft_submit(d, file, yaml, NULL, NULL);
}

/* `python3 fake_trainer.py ARGS` as --exec takes it. */
static const char *fake(const char *args)
{
    static char cmd[1024];
    snprintf(cmd, sizeof cmd, "python3 %s/tests/e2e/fake_trainer.py %s",
             bft_env_path("BF_SOURCE_ROOT"), args);
    return cmd;
}

/* Runs an exec worker of `fake` until the queue has nothing for it. */
static void run_exec_worker(bft_daemon *d, const char *tag, const char *args)
{
    pid_t w = e2e_exec_start(d, tag, "--exec", fake(args), "--trainer",
                             "fake", "--grace", "1", "--exit-when-idle",
                             "--idle-grace", "0", NULL);
    assert_true(w > 0);
    assert_int_equal(e2e_group_wait(w, 120000), 0);
}

static long long job_sql(bft_daemon *d, const char *fmt, long long sweep)
{
    char sql[512];
    snprintf(sql, sizeof sql, fmt, sweep);
    return bft_sql_int(d, sql);
}

static void job_error(bft_daemon *d, long long sweep, char *buf, size_t cap)
{
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT error FROM jobs WHERE sweep_id = %lld",
             sweep);
    e2e_sql_text(d, sql, buf, cap);
}

static void test_exec_job_stored_once(void **state)
{
    bft_daemon *d = *state;
    assert_int_equal(bft_daemon_start(d, 10), 0);
    long long exec = submit_exec(d, "exec", 200, 1);
    long long first = submit_builtin(d, "first");
    assert_true(exec > 0 && first > 0);

    /* A builtin group trains its job and leaves the exec job alone. */
    pid_t g = e2e_group_start(d, 1, "group", "--exit-when-idle",
                              "--idle-grace", "0", NULL);
    assert_true(g > 0);
    assert_int_equal(e2e_group_wait(g, 120000), 0);
    assert_int_equal(job_sql(d, "SELECT count(*) FROM jobs WHERE sweep_id = "
                             "%lld AND status = 'succeeded'", first), 1);
    assert_int_equal(job_sql(d, "SELECT attempts FROM jobs WHERE sweep_id = "
                             "%lld AND status = 'queued'", exec), 0);

    /* The exec worker trains its job and leaves a builtin one alone. */
    long long second = submit_builtin(d, "second");
    pid_t w = e2e_exec_start(d, "exec", "--exec", fake("--mode train"),
                             "--trainer", "fake", "--gpus", "1,3",
                             "--exit-when-idle", "--idle-grace", "0", NULL);
    assert_true(w > 0);
    assert_int_equal(e2e_group_wait(w, 120000), 0);
    assert_int_equal(job_sql(d, "SELECT count(*) FROM jobs WHERE sweep_id = "
                             "%lld AND status = 'succeeded'", exec), 1);
    assert_int_equal(job_sql(d, "SELECT attempts FROM jobs WHERE sweep_id = "
                             "%lld AND status = 'queued'", second), 0);

    /* Every record once: 200 train steps, 4 evals at 2 depths with their
     * outcomes, 2 freq records, the last checkpoint inside the attempt's
     * directory. */
    const char *per_job = "SELECT count(*) FROM %s m JOIN jobs j USING "
                          "(job_id) WHERE j.sweep_id = %%lld%s";
    char q[512];
    snprintf(q, sizeof q, per_job, "metrics", " AND m.key = 'loss'");
    assert_int_equal(job_sql(d, q, exec), 200);
    assert_int_equal(job_sql(d, "SELECT count(DISTINCT m.step) FROM metrics "
                             "m JOIN jobs j USING (job_id) WHERE j.sweep_id "
                             "= %lld AND m.key = 'loss' AND m.step BETWEEN 1 "
                             "AND 200", exec), 200);
    snprintf(q, sizeof q, per_job, "evals", "");
    assert_int_equal(job_sql(d, q, exec), 8);
    snprintf(q, sizeof q, per_job, "eval_outcomes", "");
    assert_int_equal(job_sql(d, q, exec), 8);
    assert_int_equal(job_sql(d, "SELECT checkpoint_step FROM jobs WHERE "
                             "sweep_id = %lld", exec), 200);
    assert_int_equal(job_sql(d, "SELECT count(*) FROM jobs WHERE sweep_id = "
                             "%lld AND checkpoint_path GLOB '*/exec/db-*/"
                             "job-*/attempt-*/checkpoints/step-000200.safetensors'",
                             exec), 1);
    /* The environment it ran with (--gpus; unbuffered Python). */
    char pattern[600];
    snprintf(pattern, sizeof pattern, "%s/exec/db-*/job-*/attempt-*/"
             "stdout.log", d->dir);
    glob_t logs;
    assert_int_equal(glob(pattern, 0, NULL, &logs), 0);
    assert_int_equal(logs.gl_pathc, 1);
    assert_int_equal(bft_file_lines_with(logs.gl_pathv[0],
                                         "CUDA_VISIBLE_DEVICES=1,3 "
                                         "PYTHONUNBUFFERED=1"), 1);
    globfree(&logs);
}

/* A sweep over the trainer's own parameters: grid params.width, the
 * trainer reads them from job.json (its eval loss is 0.5 / width: the
 * loss stored proves it read them), and
 * results, compare and SQL show them as the field params.width. */
static void test_exec_params_sweep(void **state)
{
    bft_daemon *d = *state;
    assert_int_equal(bft_daemon_start(d, 10), 0);
    long long sweep = bft_submit(d, "params.yaml", "name: params\n"
                                 "base: {trainer: fake, steps: 20, "
                                 "warmup_steps: 0, log_every: 10,\n"
                                 "       eval_every: 20, freq_every: 0, "
                                 "eval_examples: 16,\n"
                                 "       params: {act: gelu}}\n"
                                 "grid: {params.width: [1, 4]}\n"
                                 "seeds: 2\n", NULL, NULL);
    assert_true(sweep > 0);
    run_exec_worker(d, "exec", "--mode train");
    assert_int_equal(job_sql(d, "SELECT count(*) FROM jobs WHERE sweep_id = "
                             "%lld AND status = 'succeeded'", sweep), 4);
    assert_int_equal(job_sql(d, "SELECT count(*) FROM job_params p JOIN "
                             "evals e USING (job_id) WHERE p.sweep_id = %lld "
                             "AND p.name = 'width' AND p.value = 4 AND "
                             "e.loss = 0.125", sweep), 4);  /* 2 jobs x 2 depths */
    char *out = NULL;
    assert_int_equal(bft_run_client(d, &out, NULL, "results", "1", "--format",
                                    "csv", NULL), 0);
    assert_non_null(strstr(out, "params.width"));
    free(out);
    assert_int_equal(bft_run_client(d, &out, NULL, "results", "1", "--where",
                                    "params.width=4", "--format", "csv",
                                    NULL), 0);
    assert_non_null(strstr(out, "\n1,3,"));     /* jobs 3, 4: width 4 */
    assert_null(strstr(out, "\n1,1,"));
    free(out);
    assert_int_equal(bft_run_client(d, &out, NULL, "compare", "1", NULL), 0);
    assert_non_null(strstr(out, "params.width=4"));
    assert_non_null(strstr(out, "params.width=1"));
    assert_null(strstr(out, "params.act"));   /* the same in every job */
    free(out);
    json_t *data = e2e_report_json(d, "1");
    assert_non_null(data);
    json_t *fields = json_object_get(data, "fields"), *field;
    size_t i, found = 0;
    json_array_foreach(fields, i, field)
        found += strcmp(json_string_value(field), "params.width") == 0;
    assert_int_equal(found, 1);
    json_decref(data);
}

/* How the trainer ended decides the job's end. */
static void test_exec_outcomes(void **state)
{
    bft_daemon *d = *state;
    char error[2048];
    assert_int_equal(bft_daemon_start(d, 10), 0);

    long long no_done = submit_exec(d, "nodone", 20, 2);
    run_exec_worker(d, "nodone", "--mode no-done");
    assert_int_equal(job_sql(d, "SELECT count(*) FROM attempts a JOIN jobs j "
                             "USING (job_id) WHERE j.sweep_id = %lld AND "
                             "a.outcome = 'failed'", no_done), 2);
    job_error(d, no_done, error, sizeof error);
    assert_non_null(strstr(error, "status 0 without a done record"));

    long long crash = submit_exec(d, "crash", 20, 1);
    run_exec_worker(d, "crash", "--mode crash");
    job_error(d, crash, error, sizeof error);
    assert_non_null(strstr(error, "exited with status 1"));
    assert_non_null(strstr(error, "crashing on purpose"));   /* stderr */

    long long failing = submit_exec(d, "fail", 20, 3);
    run_exec_worker(d, "fail", "--mode fail");
    assert_int_equal(job_sql(d, "SELECT count(*) FROM attempts a JOIN jobs j "
                             "USING (job_id) WHERE j.sweep_id = %lld",
                             failing), 1);   /* permanent: not retried */
    job_error(d, failing, error, sizeof error);
    assert_string_equal(error, "fake trainer: this job cannot run (a "
                        "permanent error: not retried)");

    long long bad = submit_exec(d, "bad", 20, 1);
    run_exec_worker(d, "bad", "--mode malformed");
    job_error(d, bad, error, sizeof error);
    assert_non_null(strstr(error, "records.jsonl line 3: "));
    assert_non_null(strstr(error, "loss"));
    assert_int_equal(job_sql(d, "SELECT count(*) FROM metrics m JOIN jobs j "
                             "USING (job_id) WHERE j.sweep_id = %lld AND "
                             "m.key = 'loss'", bad), 2);

    long long big = submit_exec(d, "long", 20, 1);
    run_exec_worker(d, "long", "--mode long");
    job_error(d, big, error, sizeof error);
    assert_non_null(strstr(error, "records.jsonl line 2: longer than "
                           "1048576 bytes"));
}

/* The pids the hanging trainer wrote: itself and its orphan. */
static void read_pids(bft_daemon *d, long long sweep, int *pids)
{
    char pattern[600], sql[128];
    snprintf(sql, sizeof sql, "SELECT job_id FROM jobs WHERE sweep_id = %lld",
             sweep);
    snprintf(pattern, sizeof pattern, "%s/exec/db-*/job-%lld/attempt-*/pids",
             d->dir, bft_sql_int(d, sql));
    glob_t g;
    assert_int_equal(glob(pattern, 0, NULL, &g), 0);
    FILE *f = fopen(g.gl_pathv[0], "r");
    assert_non_null(f);
    assert_int_equal(fscanf(f, "%d %d", &pids[0], &pids[1]), 2);
    fclose(f);
    globfree(&g);
}

/* Whether pid runs: a zombie does not (whoever reaps an orphan of a
 * killed worker may take its time). */
static int alive(int pid)
{
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char *paren = fgets(line, sizeof line, f) ? strrchr(line, ')') : NULL;
    fclose(f);
    return paren && paren[1] == ' ' && paren[2] != 'Z';
}

/* Starts a worker on a hang-mode job and waits until it streams; *w is
 * the worker, pids its trainer and the trainer's orphan. */
static long long start_hanging(bft_daemon *d, const char *tag,
                               const char *args, pid_t *w, int *pids)
{
    long long sweep = submit_exec(d, tag, 1000000, 1);
    *w = e2e_exec_start(d, tag, "--exec", fake(args), "--trainer", "fake",
                        "--grace", "1", "--exit-when-idle", "--idle-grace",
                        "0", NULL);
    assert_true(*w > 0);
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM metrics m JOIN jobs j "
             "USING (job_id) WHERE j.sweep_id = %lld AND m.key = 'loss'",
             sweep);
    assert_true(e2e_wait_sql(d, sql, 5, 60000) >= 5);   /* a hang guard */
    read_pids(d, sweep, pids);
    assert_true(alive(pids[0]) && alive(pids[1]));
    return sweep;
}

/* The attempt of sweep ends with outcome (a hang guard), by when both
 * processes of its trainer must be gone. */
static void ended_without_processes(bft_daemon *d, long long sweep,
                                    const char *outcome, const int *pids)
{
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM attempts a JOIN jobs j "
             "USING (job_id) WHERE j.sweep_id = %lld AND a.outcome = '%s'",
             sweep, outcome);
    assert_int_equal(e2e_wait_sql(d, sql, 1, 60000), 1);
    assert_false(alive(pids[0]));
    assert_false(alive(pids[1]));
}

/* Cancels a running hang-mode job: the attempt is reported cancelled
 * after the whole tree is gone. */
static void cancel_hanging(bft_daemon *d, const char *tag, const char *args)
{
    pid_t w;
    int pids[2];
    long long sweep = start_hanging(d, tag, args, &w, pids);
    char id[32], *out = NULL;
    snprintf(id, sizeof id, "%lld", sweep);
    assert_int_equal(bft_run_client(d, &out, NULL, "cancel", id, NULL), 0);
    free(out);
    ended_without_processes(d, sweep, "cancelled", pids);
    assert_int_equal(e2e_group_wait(w, 60000), 0);
}

static void test_exec_cancel_stops_tree(void **state)
{
    bft_daemon *d = *state;
    assert_int_equal(bft_daemon_start(d, 10), 0);
    cancel_hanging(d, "hang", "--mode hang");
    assert_false(e2e_log_contains(d, "hang", "SIGKILL"));
    cancel_hanging(d, "stubborn", "--mode hang --ignore-term");
    assert_true(e2e_log_contains(d, "stubborn", "got SIGKILL"));
}

/* SIGTERM to the worker stops the tree, fails the attempt retryably and
 * ends the worker; a worker killed outright takes its trainer with it
 * (PDEATHSIG; the orphan in its own session is beyond reach then). */
static void test_exec_worker_signals(void **state)
{
    bft_daemon *d = *state;
    assert_int_equal(bft_daemon_start(d, 10), 0);
    pid_t w;
    int pids[2];
    long long sweep = start_hanging(d, "term", "--mode hang", &w, pids);
    kill(w, SIGTERM);
    assert_int_equal(e2e_group_wait(w, 60000), 0);
    ended_without_processes(d, sweep, "failed", pids);
    char error[2048];
    job_error(d, sweep, error, sizeof error);
    assert_non_null(strstr(error, "worker stopped by a signal"));

    sweep = start_hanging(d, "killed", "--mode hang", &w, pids);
    kill(w, SIGKILL);
    e2e_group_wait(w, 60000);
    for (int i = 0; i < 3000 && alive(pids[0]); i++)   /* a hang guard */
        usleep(10000);
    assert_false(alive(pids[0]));
    kill(pids[1], SIGKILL);
}

/* No coordinator for longer than the lease: it has expired the lease (or
 * will, when it is back), so the trainer is stopped, tree and all. */
static void test_exec_coordinator_lost(void **state)
{
    bft_daemon *d = *state;
    assert_int_equal(bft_daemon_start(d, 2), 0);
    pid_t w;
    int pids[2];
    start_hanging(d, "lost", "--mode hang", &w, pids);
    assert_int_equal(bft_daemon_stop(d, SIGKILL), 128 + SIGKILL);
    for (int i = 0; i < 6000 && (alive(pids[0]) || alive(pids[1])); i++)
        usleep(10000);   /* a hang guard */
    assert_false(alive(pids[0]));
    assert_false(alive(pids[1]));
    assert_int_equal(bft_daemon_restart_same_port(d), 0);
    assert_int_equal(e2e_group_wait(w, 60000), 0);
    /* said once the tree was gone (the wait above is for that line) */
    assert_true(e2e_log_contains(d, "lost", "trainer coordinator lost"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_exec_job_stored_once, e2e_setup,
                                        e2e_teardown),
        cmocka_unit_test_setup_teardown(test_exec_params_sweep, e2e_setup,
                                        e2e_teardown),
        cmocka_unit_test_setup_teardown(test_exec_outcomes, e2e_setup,
                                        e2e_teardown),
        cmocka_unit_test_setup_teardown(test_exec_cancel_stops_tree,
                                        e2e_setup, e2e_teardown),
        cmocka_unit_test_setup_teardown(test_exec_worker_signals, e2e_setup,
                                        e2e_teardown),
        cmocka_unit_test_setup_teardown(test_exec_coordinator_lost,
                                        e2e_setup, e2e_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
