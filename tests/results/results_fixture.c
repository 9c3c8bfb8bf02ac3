/* results_fixture DB: writes a Bifocal database through the real store, with
 * known, varied results for the tests of `results`, `compare` and `report`:
 *
 *   sweep 1 "fixture": rope x {rope, spectral, bifocal}, seeds 1..3, eval
 *     depths 4 and 8, 200 steps; its analysis block makes loss at eval
 *     depth 8 the primary family.  Every job succeeds but bifocal seed 3,
 *     which fails ("loss is NaN at step 120").  Each job is evaluated at
 *     step 100 and again at step 200 (the final one, which counts); trains
 *     with a loss every 10 steps; spectral and bifocal report frequencies
 *     of their learnable heads at steps 0, 100 and 200.
 *   sweep 2 "all-failed": two jobs, both fail.
 *   sweep 3 "two-fields": rope x freq_lr_mult, 2 seeds.
 *   sweep 5 "wide": spectral on 4 layers x 8 heads (256 learnable pairs).
 *   sweep 6 "tuned": stage tune searches lr per rope cell, stage confirm
 *     takes each cell's chosen lr (`from: "stage:tune"`), 3 seeds; the
 *     cells choose different lr.
 *   sweep 4 "outcomes": rope x {rope, spectral} (a zip that names them
 *     geometric and learned), seeds 1..2, eval depth
 *     4 of 128 examples with per-example outcomes: rope misses examples
 *     seed and seed + 10, spectral misses example 50 on seed 1 only (the
 *     issue's n = 2 case: 4 examples only spectral gets right, 1 only
 *     rope).  Its analysis block declares spectral the baseline by its
 *     zip label (`baseline: {label: learned}`) and alpha 0.1.
 *   sweep 7 "undecided": rope x {rope, spectral, bifocal}, seeds 1..5,
 *     eval depths 4 and 8, loss at depth 8 the primary family: spectral's
 *     loss about x0.87 of rope's, with a seed spread that leaves it
 *     undecided at 5 seeds (the seeds that would decide depend on the size
 *     of each comparison's family); bifocal's about x0.99, equivalent at
 *     depth 4 and, with 3.6 times the spread at depth 8, equivalent there
 *     only before Holm's correction (TOST p about 0.04 in a family of 2).
 *   sweep 9 "staged-adaptive": stage tune searches lr per rope cell, as
 *     sweep 6, with ASHA at step 50 (rope's trials arrive best first, so
 *     its trials 1 and 2 are pruned there), and stage confirm takes each
 *     cell's lr with seeds until decided (3..8): spectral's loss about
 *     x0.5 of rope's, decided lower by the stopping rule.  A searched, staged and adaptive sweep in one,
 *     for the dashboard's and compare's agreement.
 *
 * The description holds HTML that would end or confuse the report's
 * inline <script> elements if it were written as it is.
 * The values follow no statistics on purpose: the tests recompute every
 * statistic from the raw tables. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#include "store.h"

static const char *const fixture_sweep =
    "name: fixture\n"
    "description: \"markup in a sweep file must not break the report: "
    "</script> <!--<script> --> &amp;\"\n"
    "base:\n"
    "  task: dyck\n"
    "  depth: 4\n"
    "  eval_depths: [4, 8]\n"
    "  d_model: 32\n"
    "  n_heads: 4\n"
    "  n_layers: 1\n"
    "  seq_len: 40\n"
    "  steps: 200\n"
    "grid:\n"
    "  rope: [rope, spectral, bifocal]\n"
    "seeds: 3\n"
    "max_attempts: 1\n"
    "analysis:\n"
    "  primary: {metric: loss, eval_depth: 8}\n";

static const char *const failing_sweep =
    "name: all-failed\n"
    "base: {steps: 50}\n"
    "grid:\n"
    "  lr: [0.001, 0.002]\n"
    "max_attempts: 1\n";

/* Two grouping fields, so that a baseline can name both. */
static const char *const two_field_sweep =
    "name: two-fields\n"
    "base: {task: dyck, depth: 4, eval_depths: [4, 8], d_model: 32,\n"
    "       n_heads: 4, n_layers: 1, seq_len: 40, steps: 200}\n"
    "grid:\n"
    "  rope: [rope, spectral]\n"
    "  freq_lr_mult: [1, 10]\n"
    "seeds: 2\n"
    "max_attempts: 1\n";

static void die(const char *what, const bf_error *err)
{
    fprintf(stderr, "results_fixture: %s: %s\n", what, err ? err->msg : "");
    exit(1);
}

static json_t *job_records(const char *rope, int r, int seed,
                           const json_t *config)
{
    (void)config;
    json_t *recs = json_array();
    for (int step = 10; step <= 200; step += 10)
        json_array_append_new(recs, json_pack(
            "{s:s, s:i, s:f, s:f}", "type", "train", "step", step, "loss",
            3.0 / (1.0 + step / 40.0) + 0.02 * r + 0.013 * ((seed * 5 + step) % 7),
            "lr", 0.001));
    for (int step = 100; step <= 200; step += 100)
        for (int depth = 4; depth <= 8; depth += 4) {
            double wobble = 0.017 * ((seed * 7 + r * 3 + depth) % 5);
            double loss = step == 100 ? 9.0
                          : 0.8 + 0.25 * (2 - r) * depth / 4.0 + 0.05 * seed
                            + wobble;
            double acc = step == 100 ? 0.0
                         : 0.95 - 0.08 * (2 - r) * depth / 4.0
                           - 0.01 * seed * seed + wobble;
            json_array_append_new(recs, json_pack(
                "{s:s, s:i, s:i, s:f, s:f}", "type", "eval", "step", step,
                "depth", depth, "loss", loss, "accuracy", acc));
        }
    int first_head = strcmp(rope, "spectral") == 0 ? 0
                     : strcmp(rope, "bifocal") == 0 ? 2 : 4;
    for (int step = 0; step <= 200; step += 100)
        for (int head = first_head; head < 4; head++) {
            json_t *omega = json_array();
            for (int p = 0; p < 4; p++)
                json_array_append_new(omega, json_real(
                    (1.0 + 0.001 * step * (head + 1) * (seed + p))
                    * (p == 0 ? 1.0 : p == 1 ? 0.1 : p == 2 ? 0.01 : 0.001)));
            json_array_append_new(recs, json_pack(
                "{s:s, s:i, s:i, s:i, s:o}", "type", "freq", "step", step,
                "layer", 0, "head", head, "omega", omega));
        }
    return recs;
}

/* Sweep 4's records: one final eval at depth 4 and its outcomes. */
static json_t *outcome_records(const char *rope, int r, int seed,
                               const json_t *config)
{
    (void)config;
    (void)rope;
    unsigned char bits[16];
    memset(bits, 0xff, sizeof bits);
    int missed[2] = {r ? (seed == 1 ? 50 : -1) : seed,
                     r ? -1 : seed + 10};
    int right = 128;
    for (int i = 0; i < 2; i++)
        if (missed[i] >= 0) {
            bits[missed[i] / 8] &= (unsigned char)~(1u << missed[i] % 8);
            right--;
        }
    char hex[33];
    for (int b = 0; b < 16; b++)
        snprintf(hex + 2 * b, 3, "%02x", bits[b]);
    return json_pack("[{s:s, s:i, s:f}, {s:s, s:i, s:i, s:f, s:f},"
                     " {s:s, s:i, s:i, s:i, s:s}]",
                     "type", "train", "step", 200, "loss", 0.5,
                     "type", "eval", "step", 200, "depth", 4,
                     "loss", 0.3 + 0.01 * seed - 0.05 * r,
                     "accuracy", right / 128.0,
                     "type", "outcomes", "step", 200, "depth", 4,
                     "n", 128, "bits", hex);
}

static const char *const outcomes_sweep =
    "name: outcomes\n"
    "base: {task: dyck, depth: 4, eval_depths: [4], d_model: 32,\n"
    "       n_heads: 4, n_layers: 1, seq_len: 40, steps: 200,\n"
    "       eval_examples: 128}\n"
    "zip:\n"
    "  label: [geometric, learned]\n"
    "  rope: [rope, spectral]\n"
    "seeds: 2\n"
    "max_attempts: 1\n"
    "analysis: {baseline: {label: learned}, alpha: 0.1}\n";

/* Sweep 5 "wide": spectral on 4 layers of 8 heads of 8 pairs (256
 * learnable pairs), 2 seeds: what the spectral figures must keep readable. */
static const char *const wide_sweep =
    "name: wide\n"
    "base: {task: dyck, depth: 4, eval_depths: [4], d_model: 128,\n"
    "       n_heads: 8, n_layers: 4, seq_len: 40, steps: 200, rope: spectral}\n"
    "seeds: 2\n"
    "max_attempts: 1\n";

/* Its records: a loss, an eval, and every pair's omega at 0, 100, 200,
 * drifting by layer, head and pair so that the heatmap shows structure. */
static json_t *wide_records(const char *rope, int r, int seed,
                            const json_t *config)
{
    (void)config;
    (void)rope;
    (void)r;
    json_t *recs = json_pack("[{s:s, s:i, s:f}, {s:s, s:i, s:i, s:f, s:f}]",
                             "type", "train", "step", 200, "loss", 0.4,
                             "type", "eval", "step", 200, "depth", 4,
                             "loss", 0.5 + 0.01 * seed, "accuracy", 0.75);
    for (int step = 0; step <= 200; step += 100)
        for (int layer = 0; layer < 4; layer++)
            for (int head = 0; head < 8; head++) {
                json_t *omega = json_array();
                for (int p = 0; p < 8; p++)
                    json_array_append_new(omega, json_real(
                        pow(10000.0, -p / 8.0) * exp(0.002 * step *
                        ((head + layer + p) % 5 - 2) / (1.0 + seed))));
                json_array_append_new(recs, json_pack(
                    "{s:s, s:i, s:i, s:i, s:o}", "type", "freq", "step", step,
                    "layer", layer, "head", head, "omega", omega));
            }
    return recs;
}

/* The tune stage of sweeps 6 and 9: 3 Sobol' trials of lr per encoding,
 * each cell's best selected (sweep 9 prunes too, between the two). */
#define TUNE_STAGE \
    "  - name: tune\n" \
    "    grid: {rope: [rope, spectral]}\n" \
    "    search:\n" \
    "      method: sobol\n" \
    "      trials: 3\n" \
    "      space: {lr: {loguniform: [1.0e-4, 1.0e-2]}}\n"
#define TUNE_SELECT "    select: {by: eval_loss, eval_depth: 4}\n"

/* Sweep 6's records: one final eval at depth 4.  In stage tune rope's
 * cell does best with its smallest lr and spectral's with its largest, so
 * the two cells choose different trials and stage confirm trains each
 * encoding with its own lr. */
static const char *const tuned_sweep =
    "name: tuned\n"
    "base: {depth: 4, eval_depths: [4], steps: 100}\n"
    "max_attempts: 1\n"
    "stages:\n"
    TUNE_STAGE
    TUNE_SELECT
    "  - name: confirm\n"
    "    from: \"stage:tune\"\n"
    "    base: {steps: 150}\n"
    "    grid: {rope: [rope, spectral]}\n"
    "    seeds: 3\n";

static json_t *tuned_records(const char *rope, int r, int seed,
                             const json_t *config)
{
    (void)rope;
    double lr = json_real_value(json_object_get(config, "lr"));
    json_int_t steps = json_integer_value(json_object_get(config, "steps"));
    double loss = steps == 100   /* stage tune */
                  ? (r == 0 ? 1.0 + lr * 100 : 2.0 - lr * 50)
                  : 0.8 + 0.1 * r + 0.01 * seed;
    return json_pack("[{s:s, s:I, s:i, s:f, s:f}]", "type", "eval", "step",
                     steps, "depth", 4, "loss", loss, "accuracy", 0.5);
}

static const char *const staged_adaptive_sweep =
    "name: staged-adaptive\n"
    "base: {depth: 4, eval_depths: [4], steps: 100}\n"
    "max_attempts: 1\n"
    "analysis:\n"
    "  primary: {metric: loss, eval_depth: 4}\n"
    "  baseline: {rope: rope}\n"
    "stages:\n"
    TUNE_STAGE
    "    base: {eval_every: 50}\n"
    "    prune: {method: asha, metric: eval_loss, eval_depth: 4,\n"
    "            rungs: [50], eta: 3}\n"
    TUNE_SELECT
    "  - name: confirm\n"
    "    from: \"stage:tune\"\n"
    "    base: {steps: 150}\n"
    "    grid: {rope: [rope, spectral]}\n"
    "    seeds: {min: 3, max: 8, until: decided}\n";

/* Sweep 9's records: stage tune as sweep 6's, its loss at the rung (step
 * 50) the final one's; in stage confirm spectral's loss half rope's, times
 * a small spread of the seed's. */
static json_t *staged_adaptive_records(const char *rope, int r, int seed,
                                       const json_t *config)
{
    json_int_t steps = json_integer_value(json_object_get(config, "steps"));
    if (steps == 100) {
        json_t *recs = tuned_records(rope, r, seed, config);
        json_t *rung = json_deep_copy(json_array_get(recs, 0));
        json_object_set_new(rung, "step", json_integer(50));
        json_array_insert_new(recs, 0, rung);
        return recs;
    }
    double loss = (r == 1 ? 0.5 : 1.0) * exp(0.03 * ((seed * 7 + r) % 5 - 2));
    return json_pack("[{s:s, s:I, s:i, s:f, s:f}]", "type", "eval", "step",
                     steps, "depth", 4, "loss", loss, "accuracy", 0.5);
}

static const char *const undecided_sweep =
    "name: undecided\n"
    "base: {depth: 4, eval_depths: [4, 8], steps: 100}\n"
    "grid:\n"
    "  rope: [rope, spectral, bifocal]\n"
    "seeds: 5\n"
    "max_attempts: 1\n"
    "analysis:\n"
    "  primary: {metric: loss, eval_depth: 8}\n";

/* Sweep 8: a trainer's own parameters (docs/job-config.md, params): the
 * results commands and the dashboard treat params.width as a field. */
static const char *const params_sweep =
    "name: params\n"
    "base: {trainer: fake, depth: 4, eval_depths: [4, 8], steps: 100,\n"
    "       params: {act: gelu}}\n"
    "grid:\n"
    "  params.width: [256, 512]\n"
    "seeds: 2\n";

/* Sweep 7's records: a final eval at depths 4 and 8, the loss a factor of
 * the encoding times a spread of the seed's (log scale). */
static json_t *undecided_records(const char *rope, int r, int seed,
                                 const json_t *config)
{
    (void)rope;
    (void)config;
    static const double factor[3] = { 1.0, 0.87, 0.99 };
    static const double spread[5][3] = {
        { 0.00, 0.10, 0.02 },  { 0.05, -0.12, 0.06 }, { -0.04, -0.02, -0.05 },
        { 0.02, 0.15, 0.00 },  { -0.03, -0.18, -0.01 },
    };
    json_t *recs = json_array();
    for (int depth = 4; depth <= 8; depth += 4) {
        double s = spread[seed - 1][r] * (depth == 4 ? 1.0 : 3.6);
        json_array_append_new(recs, json_pack(
            "{s:s, s:i, s:i, s:f, s:f}", "type", "eval", "step", 100,
            "depth", depth, "loss", (0.5 + 0.1 * depth) * factor[r] * exp(s),
            "accuracy", 0.6 - 0.02 * depth + 0.03 * r - 0.4 * s));
    }
    return recs;
}

typedef json_t *(*records_fn)(const char *rope, int r, int seed,
                              const json_t *config);

static int64_t now_ms = 1780000000000;

/* Runs every queued job of `trainer` (NULL: builtin). */
static void run_jobs(bf_store *s, const char *trainer, int fail_all,
                     records_fn records)
{
    bf_lease l;
    bf_error err;
    int rc;
    while ((rc = bf_store_lease_for(s, "fixture-worker", NULL, trainer, now_ms,
                                    60000, &l, &err)) == 1) {
        now_ms += 61000;
        json_t *config = json_loads(l.config_json, 0, NULL);
        const char *rope = json_string_value(json_object_get(config, "rope"));
        int seed = (int)json_integer_value(json_object_get(config, "seed"));
        int r = strcmp(rope, "spectral") == 0 ? 1 : strcmp(rope, "bifocal") == 0 ? 2 : 0;
        json_t *recs = records(rope, r, seed, config);
        if (bf_store_ingest(s, l.attempt_id, recs, NULL, NULL, &err)
            || bf_store_flush(s, &err))
            die("ingest", &err);
        int fail = fail_all || (r == 2 && seed == 3);
        if (bf_store_finish_attempt(s, l.attempt_id, !fail,
                                    fail ? "loss is NaN at step 120" : NULL,
                                    now_ms + 1000, NULL))
            die("finish", NULL);
        json_decref(recs);
        json_decref(config);
        bf_lease_clear(&l);
    }
    if (rc < 0)
        die("lease", &err);
}

static void submit(bf_store *s, const char *name, const char *text)
{
    int64_t id;
    int n;
    bf_error err;
    if (bf_store_submit_sweep(s, name, text, strlen(text), NULL, now_ms, &id,
                              &n, NULL, &err))
        die("submit", &err);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: results_fixture DB\n");
        return 2;
    }
    bf_store *s;
    bf_error err;
    remove(argv[1]);
    if (bf_store_open(&s, argv[1], &err))
        die("open", &err);
    if (bf_store_worker_seen(s, "fixture-worker", "localhost", 2, 0, now_ms, NULL))
        die("worker", NULL);
    submit(s, "fixture.yaml", fixture_sweep);
    run_jobs(s, NULL, 0, job_records);
    submit(s, "all-failed.yaml", failing_sweep);
    run_jobs(s, NULL, 1, job_records);
    submit(s, "two-fields.yaml", two_field_sweep);
    run_jobs(s, NULL, 0, job_records);
    submit(s, "outcomes.yaml", outcomes_sweep);
    run_jobs(s, NULL, 0, outcome_records);
    submit(s, "wide.yaml", wide_sweep);
    run_jobs(s, NULL, 0, wide_records);
    submit(s, "tuned.yaml", tuned_sweep);
    run_jobs(s, NULL, 0, tuned_records);
    submit(s, "undecided.yaml", undecided_sweep);
    run_jobs(s, NULL, 0, undecided_records);
    submit(s, "params.yaml", params_sweep);
    run_jobs(s, "fake", 0, job_records);
    submit(s, "staged-adaptive.yaml", staged_adaptive_sweep);
    run_jobs(s, NULL, 0, staged_adaptive_records);
    bf_store_close(s);
    return 0;
}
