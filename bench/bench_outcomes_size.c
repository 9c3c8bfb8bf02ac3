/* bench_outcomes_size: what the per-example outcomes (eval_outcomes,
 * migration 15) add to the database of the study (research/findings.md).
 *
 * Submits configs/study-structure-gap.yaml (108 jobs) through the real
 * store twice, into two fresh databases, and writes for every job the
 * records its config makes the trainer emit (common/records.h, as
 * engine/train.c schedules them: train every log_every steps, eval at each
 * eval depth every eval_every steps, freq of the learnable heads every
 * freq_every steps and of every head at step 0 and the last step, all at
 * the last step too), with random values of the right types; the second
 * database also gets the outcomes record after each eval record.  Prints
 * both file sizes and the difference as a share of the first (issue 18:
 * at most 10%).
 *
 * usage: bench_outcomes_size [DIR]   (default: a fresh directory under
 *                                     /tmp, removed at the end) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file.h"
#include "job_config.h"
#include "records.h"
#include "store.h"

static void die(const char *what, const bf_error *err)
{
    fprintf(stderr, "bench_outcomes_size: %s: %s\n", what,
            err ? err->msg : "");
    exit(1);
}

static int due(int step, int every, int last)
{
    return step == last || (every > 0 && step % every == 0);
}

static double noise(unsigned *seed)
{
    return (double)rand_r(seed) / RAND_MAX;
}

static void add(json_t *recs, const bf_record *r)
{
    json_array_append_new(recs, bf_record_to_json(r));
}

/* The freq records of step `step`: every head at the first and last step,
 * else the learnable ones (the last `learnable` of each layer). */
static void add_freqs(json_t *recs, const bf_job_config *c, int step,
                      unsigned *seed)
{
    int learnable = bf_job_config_spectral_heads(c);
    int every_head = step == 0 || step == c->steps;
    float omega[64];
    int pairs = c->d_model / c->n_heads / 2;
    if (c->rope == BF_ROPE_NONE || (!every_head && (!learnable ||
        !due(step, c->freq_every, c->steps))))
        return;
    for (int layer = 0; layer < c->n_layers; layer++)
        for (int h = every_head ? 0 : c->n_heads - learnable;
             h < c->n_heads; h++) {
            for (int p = 0; p < pairs; p++)
                omega[p] = (float)(pow(c->rope_base, -p / (double)pairs) *
                                   (1 + 0.1 * noise(seed)));
            bf_record r = {.kind = BF_RECORD_FREQ, .step = step,
                           .u.freq = {layer, h, pairs, omega}};
            add(recs, &r);
        }
}

static void add_evals(json_t *recs, const bf_job_config *c, int step,
                      int with_outcomes, unsigned *seed)
{
    unsigned char bits[BF_OUTCOMES_BYTES(BF_OUTCOMES_MAX_EXAMPLES)];
    for (int k = 0; k < c->n_eval_depths; k++) {
        bf_record r = {.kind = BF_RECORD_EVAL, .step = step,
                       .u.eval = {c->eval_depths[k], 1 + noise(seed),
                                  noise(seed)}};
        add(recs, &r);
        if (!with_outcomes)
            continue;
        for (size_t b = 0; b < BF_OUTCOMES_BYTES(c->eval_examples); b++)
            bits[b] = (unsigned char)rand_r(seed);
        if (c->eval_examples % 8)
            bits[c->eval_examples / 8] &= (1u << c->eval_examples % 8) - 1;
        r = (bf_record){.kind = BF_RECORD_OUTCOMES, .step = step,
                        .u.outcomes = {c->eval_depths[k], c->eval_examples,
                                       bits}};
        add(recs, &r);
    }
}

/* Every record one job of config c emits, in one metrics batch a step. */
static void write_job(bf_store *s, const bf_lease *l, int with_outcomes,
                      unsigned seed)
{
    bf_job_config c;
    bf_job_config_defaults(&c);
    json_t *config = json_loads(l->config_json, 0, NULL);
    bf_error err;
    if (bf_job_config_apply_json(&c, config, NULL, NULL, &err))
        die("config", &err);
    json_decref(config);
    for (int step = 0; step <= c.steps; step++) {
        json_t *recs = json_array();
        if (step > 0 && due(step, c.log_every, c.steps)) {
            bf_record r = {.kind = BF_RECORD_TRAIN, .step = step};
            for (int i = 0; i < BF_N_METRICS; i++)
                r.u.train.value[i] = noise(&seed);
            add(recs, &r);
        }
        if (step > 0 && due(step, c.eval_every, c.steps))
            add_evals(recs, &c, step, with_outcomes, &seed);
        add_freqs(recs, &c, step, &seed);
        if (json_array_size(recs) &&
            bf_store_ingest(s, l->attempt_id, recs, NULL, NULL, &err))
            die("ingest", &err);
        json_decref(recs);
    }
}

/* The study's database, with or without outcomes; returns its size. */
static long long make_database(const char *dir, const char *name,
                               const char *sweep, int with_outcomes)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    bf_store *s;
    bf_error err;
    if (bf_store_open(&s, path, &err))
        die("open", &err);
    if (bf_store_submit_sweep(s, "study-structure-gap.yaml", sweep,
                              strlen(sweep), NULL, 0, NULL, NULL, NULL, &err))
        die("submit", &err);
    bf_lease l;
    unsigned seed = 1;
    while (bf_store_lease_next(s, "bench", NULL, 0, 1000000000, &l, &err) == 1) {
        write_job(s, &l, with_outcomes, seed++);
        if (bf_store_flush(s, &err))
            die("flush", &err);
        if (bf_store_finish_attempt(s, l.attempt_id, 1, NULL, 1, NULL))
            die("finish", NULL);
        bf_lease_clear(&l);
    }
    bf_store_close(s);   /* the last connection: the WAL is folded in */
    struct stat st;
    if (stat(path, &st))
        die("stat", NULL);
    return (long long)st.st_size;
}

int main(int argc, char **argv)
{
    char tmp[] = "/tmp/bench_outcomes_size.XXXXXX";
    const char *dir = argc > 1 ? argv[1] : mkdtemp(tmp);
    bf_error err;
    char *sweep = bf_read_file(BENCH_SOURCE_ROOT
                               "/configs/study-structure-gap.yaml", NULL, &err);
    if (!dir || !sweep)
        die("setup", sweep ? NULL : &err);
    long long without = make_database(dir, "without.db", sweep, 0);
    long long with = make_database(dir, "with.db", sweep, 1);
    printf("study database (configs/study-structure-gap.yaml, 108 jobs):\n"
           "  without per-example outcomes  %10lld bytes\n"
           "  with them (eval_outcomes)     %10lld bytes\n"
           "  added                         %10lld bytes = %.1f%% "
           "(target: at most 10%%)\n", without, with, with - without,
           100.0 * (double)(with - without) / (double)without);
    free(sweep);
    if (argc <= 1) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0)
            return 1;
    }
    return 0;
}
