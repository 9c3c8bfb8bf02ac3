/* Stages end to end, with real mpirun groups: a second stage starts from
 * the final checkpoints of the first (its weights, checked through the
 * learned frequencies it starts with), a failed source fails its
 * dependents without leasing them, and a permanent error (an init_from
 * that does not exist, given relative to the sweep file and resolved by
 * `bifocal submit`) fails its job on the first of its 3 attempts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2e.h"

#define SMALL "d_model: 32, n_layers: 2, n_heads: 4, seq_len: 40, " \
              "batch_size: 8, warmup_steps: 0, log_every: 1, "       \
              "eval_every: 0, freq_every: 0, eval_examples: 16"

/* Submits text (written to DIR/name) with the real client, which resolves
 * relative init_from paths against DIR; asserts it was taken. */
static void submit_file(bft_daemon *d, const char *name, const char *text)
{
    const char *path = bft_write_file(d, name, text);
    char *out = NULL, *err = NULL;
    int rc = bft_run_client(d, &out, &err, "submit", path, NULL);
    if (rc != 0)
        fail_msg("bifocal submit %s: exit %d: %s", path, rc, err);
    assert_non_null(strstr(out, "sweep 1:"));
    assert_null(strstr(err, "warning"));
    free(out);
    free(err);
}

/* One group of np ranks until the queue is empty. */
static void run_group(bft_daemon *d, int np)
{
    pid_t g = e2e_group_start(d, np, "group", "--exit-when-idle",
                              "--idle-grace", "0", NULL);
    assert_true(g > 0);
    assert_int_equal(e2e_group_wait(g, 150000), 0);
}

static const char two_stages[] =
    "name: two-stages\n"
    "base: {" SMALL ", lr: 0.003}\n"
    "stages:\n"
    "  - name: first\n"
    "    base: {rope: spectral, freq_lr_mult: 100, steps: 20}\n"
    "    seeds: 2\n"
    "  - name: second\n"
    "    base: {init_from: \"stage:first\", steps: 10}\n"
    "    grid: {rope: [rope, spectral]}\n"
    "    seeds: 2\n";

static void test_second_stage_starts_from_first(void **state)
{
    bft_daemon *d = *state;
    assert_int_equal(bft_daemon_start(d, 10), 0);
    submit_file(d, "stages.yaml", two_stages);
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM jobs WHERE status "
                                 "= 'waiting' AND stage = 'second'"), 4);
    run_group(d, 2);
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM jobs WHERE status "
                                 "= 'succeeded'"), 6);
    /* Each second-stage job started from its source's final checkpoint:
     * the seed's first-stage job, at its last step. */
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM jobs j JOIN jobs s "
                                 "ON s.job_id = j.source_job_id WHERE "
                                 "j.stage = 'second' AND s.stage = 'first' "
                                 "AND s.seed = j.seed AND s.checkpoint_step = "
                                 "20 AND j.init_from = s.checkpoint_path AND "
                                 "j.init_from LIKE '/%/job-' || s.job_id || "
                                 "'/step-000020.safetensors'"), 4);
    /* The first stage learned its frequencies away from the geometric
     * start ... */
    assert_true(bft_sql_int(d, "SELECT count(*) FROM frequencies a JOIN "
                            "frequencies b USING (job_id, layer, head, pair) "
                            "WHERE a.job_id = 1 AND a.step = 0 AND b.step = "
                            "20 AND abs(a.omega - b.omega) > 1e-3 * "
                            "abs(a.omega)") > 0);
    /* ... and every second-stage job begins with exactly those: 4 jobs x
     * 2 layers x 4 heads x 4 pairs, rope and spectral alike. */
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM jobs j JOIN "
                                 "frequencies f ON f.job_id = j.job_id AND "
                                 "f.step = 0 JOIN frequencies s ON s.job_id = "
                                 "j.source_job_id AND s.step = 20 AND s.layer "
                                 "= f.layer AND s.head = f.head AND s.pair = "
                                 "f.pair WHERE j.stage = 'second' AND "
                                 "abs(f.omega - s.omega) <= 1e-6 * "
                                 "abs(s.omega)"), 4 * 2 * 4 * 4);
    /* Trained weights: the first step's loss is the source's last one's
     * neighbour, below the source's own untrained first step. */
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM jobs j JOIN metrics "
                                 "m ON m.job_id = j.job_id AND m.key = 'loss' "
                                 "AND m.step = 1 JOIN metrics s ON s.job_id = "
                                 "j.source_job_id AND s.key = 'loss' AND "
                                 "s.step = 1 WHERE j.stage = 'second' AND "
                                 "m.value < s.value"), 4);
    /* results, compare and report carry the stage. */
    char *out = NULL;
    assert_int_equal(bft_run_client(d, &out, NULL, "results", "1", "--format",
                                    "csv", NULL), 0);
    assert_non_null(strstr(out, "sweep_id,job_id,stage,"));
    assert_non_null(strstr(out, ",second,"));
    free(out);
    assert_int_equal(bft_run_client(d, &out, NULL, "compare", "1",
                                    "--verbose", NULL), 0);
    assert_non_null(strstr(out, "stage=second: rope=spectral vs rope=rope"));
    assert_null(strstr(out, "stage=first: rope=spectral vs"));
    free(out);
    json_t *data = e2e_report_json(d, "1");
    assert_non_null(data);
    assert_string_equal(json_string_value(json_array_get(json_object_get(data,
                        "fields"), 0)), "stage");
    assert_string_equal(json_string_value(json_object_get(json_array_get(
                        json_object_get(data, "jobs"), 2), "stage")), "second");
    json_decref(data);
}

static const char failing_source[] =
    "name: failing-source\n"
    "max_attempts: 1\n"
    "base: {" SMALL "}\n"
    "stages:\n"
    "  - name: first\n"
    "    base: {rope: spectral, lr: 10, freq_lr_mult: 1000000, steps: 200}\n"
    "  - name: second\n"
    "    base: {init_from: \"stage:first\", rope: rope, steps: 10}\n"
    "  - name: third\n"
    "    base: {init_from: \"stage:second\", rope: rope, steps: 20}\n";

static void test_failed_source_fails_dependents(void **state)
{
    bft_daemon *d = *state;
    assert_int_equal(bft_daemon_start(d, 10), 0);
    submit_file(d, "fail.yaml", failing_source);
    run_group(d, 1);
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM jobs WHERE job_id = "
                                 "1 AND status = 'failed' AND error LIKE "
                                 "'diverged at step %'"), 1);
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM jobs WHERE job_id = "
                                 "2 AND status = 'failed' AND error = 'source "
                                 "job 1 failed'"), 1);
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM jobs WHERE job_id = "
                                 "3 AND status = 'failed' AND error = 'source "
                                 "job 2 failed'"), 1);
    /* Never leased. */
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM attempts WHERE "
                                 "job_id > 1"), 0);
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM sweeps WHERE status "
                                 "= 'done'"), 1);
}

static const char missing_init[] =
    "name: missing-init\n"
    "max_attempts: 3\n"
    "base: {" SMALL ", steps: 10, init_from: ck-missing/step-000020.safetensors}\n";

static void test_missing_init_from_fails_at_once(void **state)
{
    bft_daemon *d = *state;
    assert_int_equal(bft_daemon_start(d, 10), 0);
    submit_file(d, "missing.yaml", missing_init);
    /* bifocal submit made the path absolute, in the file's folder. */
    assert_int_equal(bft_sql_int(d, "SELECT json_extract(config, '$.init_from')"
                                 " LIKE '/%/ck-missing/step-000020.safetensors'"
                                 " FROM jobs"), 1);
    run_group(d, 2);
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM jobs WHERE status = "
                                 "'failed' AND attempts = 1 AND error LIKE "
                                 "'%ck-missing/step-000020.safetensors%' AND "
                                 "error LIKE '%(a permanent error: not "
                                 "retried)'"), 1);
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM attempts"), 1);
    assert_true(e2e_log_contains(d, "group", "reported permanent failure"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_second_stage_starts_from_first,
                                        e2e_setup, e2e_teardown),
        cmocka_unit_test_setup_teardown(test_failed_source_fails_dependents,
                                        e2e_setup, e2e_teardown),
        cmocka_unit_test_setup_teardown(test_missing_init_from_fails_at_once,
                                        e2e_setup, e2e_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
