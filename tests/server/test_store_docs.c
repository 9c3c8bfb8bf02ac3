/* Every ```sql block of docs/schema.md runs, as printed, with the real
 * sqlite3 CLI against a database the store populated, and returns rows. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "file.h"
#include "test_store_util.h"

static const char *sqlite3_cli, *schema_md;   /* argv[1], argv[2] */

static char *read_file(const char *path)
{
    bf_error err;
    char *text = bf_read_file(path, NULL, &err);
    if (!text)
        fail_msg("%s", err.msg);
    return text;
}

/* Runs one attempt of the next queued job: ingests records, then ends it
 * (outcome 1 succeeded, 0 failed, -1 left running). */
static void run_job(bf_store *s, int outcome, int with_freq)
{
    bf_lease l;
    bf_error err = {0};
    assert_int_equal(bf_store_lease_next(s, "gpu-0", NULL, 1700000000000, 60000, &l, &err), 1);
    json_t *recs = json_pack("[{s:s,s:i,s:f},{s:s,s:i,s:f},"
                             "{s:s,s:i,s:i,s:f,s:f},{s:s,s:i,s:i,s:f,s:f}]",
                             "type", "train", "step", 10, "loss", 2.0,
                             "type", "train", "step", 20, "loss", 1.5,
                             "type", "eval", "step", 20, "depth", 4, "loss", 1.0,
                             "accuracy", 0.75,
                             "type", "eval", "step", 20, "depth", 8, "loss", 2.0,
                             "accuracy", 0.25);
    /* 0.75 and 0.25 of 4 examples */
    json_array_append_new(recs, json_pack("{s:s,s:i,s:i,s:i,s:s}", "type",
                          "outcomes", "step", 20, "depth", 4, "n", 4,
                          "bits", "0b"));
    json_array_append_new(recs, json_pack("{s:s,s:i,s:i,s:i,s:s}", "type",
                          "outcomes", "step", 20, "depth", 8, "n", 4,
                          "bits", "04"));
    for (int step = 0; with_freq && step <= 20; step += 20)
        for (int head = 2; head < 4; head++)
            json_array_append_new(recs, json_pack("{s:s,s:i,s:i,s:i,s:[f,f]}", "type",
                                                  "freq", "step", step, "layer", 0,
                                                  "head", head, "omega", 1.0 + step,
                                                  0.5));
    if (outcome == 0)   /* a failed job's last loss is not a number */
        json_array_append_new(recs, json_pack("{s:s,s:i,s:s}", "type", "train",
                                              "step", 30, "loss", "nan"));
    assert_int_equal(bf_store_ingest(s, l.attempt_id, recs, NULL, NULL, &err), 0);
    if (outcome >= 0)
        assert_int_equal(bf_store_finish_attempt(s, l.attempt_id, outcome,
                                                 outcome ? NULL : "loss is NaN", 2, NULL), 0);
    json_decref(recs);
    bf_lease_clear(&l);
}

/* Sweep 4: a search of 3 trials, pruned by ASHA at step 20 (the second
 * trial's decision is to prune) and selected at depth 4: every trial runs
 * to its end here, so the cell is ranked, and the confirm stage's job
 * takes the chosen values. */
static void populate_search(bf_store *s)
{
    int64_t id = bft_submit(s, "name: tune\nbase: {steps: 100, eval_every: "
                            "10, depth: 4, eval_depths: [4]}\nstages:\n"
                            "  - name: tune\n    search: {method: sobol, "
                            "trials: 3, space: {lr: {loguniform: [1.0e-4, "
                            "1.0e-2]}}}\n    prune: {method: asha, metric: "
                            "eval_loss, eval_depth: 4, rungs: [20], eta: 3}\n"
                            "    select: {by: eval_loss, eval_depth: 4}\n"
                            "  - name: confirm\n    from: \"stage:tune\"\n"
                            "    seeds: [7]\n", 1700000000000, NULL);
    int trials = 0;
    for (int i = 0; i < 10 && trials < 3; i++) {
        char worker[16];
        snprintf(worker, sizeof worker, "tune-%d", i);
        bf_lease l;
        assert_int_equal(bf_store_lease_next(s, worker, NULL, 1700000000000, 60000,
                                             &l, NULL), 1);
        if (l.sweep_id == id) {
            double loss = 1.0 + trials++;
            json_t *recs = json_pack("[{s:s,s:i,s:i,s:f,s:f},"
                                     "{s:s,s:i,s:i,s:f,s:f}]", "type", "eval",
                                     "step", 20, "depth", 4, "loss", loss,
                                     "accuracy", 0.5, "type", "eval", "step",
                                     100, "depth", 4, "loss", loss / 2,
                                     "accuracy", 0.75);
            assert_int_equal(bf_store_ingest(s, l.attempt_id, recs, NULL, NULL,
                                             NULL), 0);
            json_decref(recs);
            assert_int_equal(bf_store_finish_attempt(s, l.attempt_id, 1, NULL,
                                                     1700000000000, NULL), 0);
        }
        bf_lease_clear(&l);
    }
    assert_int_equal(trials, 3);
}

static void populate(bf_store *s)
{
    bft_submit(s, "name: docs\nbase: {depth: 4, eval_depths: [4, 8]}\n"
                  "grid: {rope: [rope, bifocal]}\nseeds: 2\nmax_attempts: 1\n"
                  "analysis: {primary: {metric: loss, eval_depth: 8},"
                  " baseline: {rope: rope}}\n",
               1700000000000, NULL);
    assert_int_equal(bf_store_worker_seen(s, "gpu-0", "node1", 4, 1, 1700000000000, NULL), 0);
    run_job(s, 1, 0);    /* rope, seed 1: succeeded */
    run_job(s, 0, 0);    /* rope, seed 2: failed */
    run_job(s, 1, 1);    /* bifocal, seed 1: succeeded, with frequencies */
    run_job(s, -1, 1);   /* bifocal, seed 2: still running */
    /* Sweep 2: two stages, the second waiting; a warning (spectral_fraction
     * has no effect with rope). */
    bft_submit(s, "name: staged\nbase: {steps: 20, warmup_steps: 0}\n"
                  "stages:\n"
                  "  - {name: a, base: {rope: rope, spectral_fraction: 0.25}}\n"
                  "  - {name: b, base: {init_from: \"stage:a\", rope: bifocal}}\n",
               1700000000000, NULL);
    /* Sweep 3: adaptive seeds, its comparison still running. */
    bft_submit(s, "name: adaptive\nbase: {depth: 4, eval_depths: [4]}\n"
                  "grid: {rope: [rope, bifocal]}\n"
                  "seeds: {min: 2, max: 4, until: decided}\n"
                  "analysis: {primary: {metric: loss, eval_depth: 4},"
                  " baseline: {rope: rope}}\n",
               1700000000000, NULL);
    populate_search(s);
    /* Sweep 5: a trainer's own parameters (job_params), jobs queued. */
    bft_submit(s, "name: widths\nbase: {trainer: fake, params: {act: gelu}}\n"
                  "grid: {params.width: [256, 512]}\nseeds: 2\n",
               1700000000000, NULL);
}

static void test_every_sql_block_runs(void **state)
{
    (void)state;
    char *dir = bft_tmpdir();
    char *db = NULL;
    bf_store *s = bft_open(dir, "docs.db", &db);
    populate(s);
    bf_store_close(s);

    char *md = read_file(schema_md);
    int blocks = 0;
    for (char *p = md; (p = strstr(p, "```sql\n")); blocks++) {
        p += strlen("```sql\n");
        char *end = strstr(p, "```");
        assert_non_null(end);
        char sqlpath[1024];
        snprintf(sqlpath, sizeof sqlpath, "%s/block%d.sql", dir, blocks);
        FILE *f = fopen(sqlpath, "w");
        fwrite(p, 1, (size_t)(end - p), f);
        fclose(f);
        char cmd[4096];
        snprintf(cmd, sizeof cmd, "'%s' -bail '%s' < '%s'", sqlite3_cli, db, sqlpath);
        int status;
        char *out = bft_run(cmd, &status);
        if (status != 0 || strstr(out, "Error") || strstr(out, "error"))
            fail_msg("docs/schema.md block %d failed (exit %d):\n%.*s\n%s", blocks,
                     status, (int)(end - p), p, out);
        if (out[0] == '\0')
            fail_msg("docs/schema.md block %d returned no rows:\n%.*s", blocks,
                     (int)(end - p), p);
        free(out);
        p = end + 3;
    }
    assert_true(blocks >= 8);
    free(md);
    free(db);
    bft_rmdir(dir);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s SQLITE3 DOCS/SCHEMA.MD\n", argv[0]);
        return 2;
    }
    sqlite3_cli = argv[1];
    schema_md = argv[2];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_sql_block_runs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
