/* The training loop: schedule, records, bit-identical resume, learning a
 * real task, and data-parallel math with two ranks in one process. */
#include "test_train_util.h"

#include <math.h>
#include <pthread.h>

#include "checkpoint.h"
#include "clock.h"
#include "model.h"
#include "tasks.h"
#include "test_isa_util.h"

static void test_lr_schedule(void **state)
{
    (void)state;
    bf_job_config c;
    tiny_config(&c, BF_ROPE_GEOMETRIC);
    c.lr = 1e-2;
    c.warmup_steps = 4;
    c.steps = 20;
    assert_float_equal(bf_lr_at(&c, 1), 0.25e-2, 1e-12);
    assert_float_equal(bf_lr_at(&c, 2), 0.5e-2, 1e-12);
    assert_float_equal(bf_lr_at(&c, 4), 1e-2, 1e-12);
    assert_float_equal(bf_lr_at(&c, 12), 0.55e-2, 1e-12);  /* half way */
    assert_float_equal(bf_lr_at(&c, 20), 0.1e-2, 1e-12);   /* 10% at end */
    for (int n = 5; n <= 20; n++)
        assert_true(bf_lr_at(&c, n) < bf_lr_at(&c, n - 1));
    c.warmup_steps = 0;
    assert_true(bf_lr_at(&c, 1) < 1e-2 && bf_lr_at(&c, 1) > 0.99e-2);
}

static const json_t *find_record(const record_log *log, const char *type,
                                 int step, size_t *from)
{
    size_t i;
    json_t *r;
    json_array_foreach(log->records, i, r) {
        if (i < *from)
            continue;
        if (strcmp(json_string_value(json_object_get(r, "type")), type) == 0
            && json_integer_value(json_object_get(r, "step")) == step) {
            *from = i + 1;
            return r;
        }
    }
    return NULL;
}

/* Every eval record is followed by its outcomes record, whose bits count
 * the eval's exactly-right examples. */
static void check_outcomes_follow_evals(const record_log *log, int n)
{
    assert_int_equal(count_type(log, "outcomes"), count_type(log, "eval"));
    size_t i;
    json_t *r;
    json_array_foreach(log->records, i, r) {
        if (strcmp(json_string_value(json_object_get(r, "type")), "eval"))
            continue;
        const json_t *o = json_array_get(log->records, i + 1);
        assert_string_equal(json_string_value(json_object_get(o, "type")),
                            "outcomes");
        assert_true(json_equal(json_object_get(o, "depth"),
                               json_object_get(r, "depth")));
        assert_int_equal(json_integer_value(json_object_get(o, "n")), n);
        unsigned char bits[BF_OUTCOMES_BYTES(64)];
        assert_true(n <= 64);
        assert_int_equal(bf_outcomes_from_hex(json_string_value(
                         json_object_get(o, "bits")), n, bits), 0);
        int right = 0;
        for (int e = 0; e < n; e++)
            right += bits[e / 8] >> (e % 8) & 1;
        assert_float_equal(json_real_value(json_object_get(r, "accuracy")),
                           (double)right / n, 1e-12);
    }
}

static void test_records_schedule(void **state)
{
    (void)state;
    bf_job_config c;
    tiny_config(&c, BF_ROPE_BIFOCAL);  /* last head of each layer learns */
    c.steps = 7;
    c.log_every = 3;
    c.eval_every = 3;
    c.freq_every = 3;
    c.eval_depths[1] = 2;
    c.n_eval_depths = 2;
    record_log log = {json_array()};
    run_job(&c, NULL, NULL, &log, NULL);

    /* train at 3, 6 and the last step 7; eval at 3, 6, 7 for two depths;
     * freq at 3 and 6 for the 2 learnable heads, and at 0 and 7 for all 4
     * heads (the fixed ones too); then done. */
    assert_int_equal(count_type(&log, "train"), 3);
    assert_int_equal(count_type(&log, "eval"), 6);
    assert_int_equal(count_type(&log, "freq"), 2 * 2 + 2 * 4);
    assert_int_equal(count_type(&log, "checkpoint"), 0);
    check_outcomes_follow_evals(&log, c.eval_examples);
    size_t from = 0;
    const json_t *r = find_record(&log, "freq", 0, &from);
    assert_non_null(r);
    assert_int_equal(json_integer_value(json_object_get(r, "head")), 0);
    assert_int_equal(json_array_size(json_object_get(r, "omega")), 4);
    from = 0;
    r = find_record(&log, "freq", 3, &from);
    assert_non_null(r);
    assert_int_equal(json_integer_value(json_object_get(r, "head")), 1);
    const int train_steps[] = {3, 6, 7};
    from = 0;
    for (int k = 0; k < 3; k++) {
        r = find_record(&log, "train", train_steps[k], &from);
        assert_non_null(r);
        double loss = json_real_value(json_object_get(r, "loss"));
        assert_true(loss > 0 && loss < 5);
        assert_true(json_real_value(json_object_get(r, "grad_norm")) > 0);
        assert_true(json_real_value(json_object_get(r, "tokens_per_s")) > 0);
        assert_float_equal(json_real_value(json_object_get(r, "lr")),
                           bf_lr_at(&c, train_steps[k]), 1e-9);
    }
    from = 0;
    r = find_record(&log, "eval", 7, &from);
    assert_non_null(r);
    assert_int_equal(json_integer_value(json_object_get(r, "depth")), 3);
    double acc = json_real_value(json_object_get(r, "accuracy"));
    assert_true(acc >= 0 && acc <= 1);
    const json_t *done = json_array_get(log.records,
                                        json_array_size(log.records) - 1);
    assert_string_equal(json_string_value(json_object_get(done, "type")),
                        "done");
    assert_int_equal(json_integer_value(json_object_get(done, "step")), 7);
    assert_false(json_boolean_value(json_object_get(done, "stopped")));
    assert_int_equal(json_array_size(json_object_get(done, "eval")), 2);
    json_decref(log.records);
}

/* The run's time split by part (bench_group --study prints it): with
 * evaluations, frequency records, checkpoints and a record hook every part
 * is charged, and the parts exclude each other, so together they are
 * within the run's own time. */
static void test_time_parts(void **state)
{
    (void)state;
    bf_job_config c;
    tiny_config(&c, BF_ROPE_BIFOCAL);
    c.steps = 6;
    c.log_every = 2;
    c.eval_every = 3;
    c.freq_every = 2;
    c.checkpoint_every = 3;
    char ck[128];
    snprintf(ck, sizeof ck, "%s/parts", dir);
    mkdir(ck, 0777);
    record_log log = {json_array()};
    bf_trainer_opts o = {.rank = 0, .nranks = 1, .checkpoint_dir = ck,
                         .hooks = {.ctx = &log, .emit = collect_record}};
    bf_trainer *t;
    bf_error err;
    assert_int_equal(bf_trainer_create(&t, &c, &o, &err), 0);
    double t0 = bf_now_seconds();
    assert_int_equal(bf_trainer_run(t, &err), 0);
    double wall = bf_now_seconds() - t0, sum = 0;
    const bf_train_summary *s = bf_trainer_summary(t);
    for (int p = 0; p < BF_PART_COUNT; p++) {
        assert_true(s->seconds[p] > 0);
        sum += s->seconds[p];
    }
    assert_true(sum <= wall);
    bf_trainer_free(t);
    json_decref(log.records);
}

/* Asks to stop after step 20: the hook is polled during a step, before its
 * train record, so step 20 is the one that sees 19 (log_every 1). */
static int stop_at_20(void *ctx)
{
    return count_type(ctx, "train") >= 19;
}

/* Runs c for 40 steps uninterrupted and stopped at 20 then resumed (in
 * scratch folders named after `name`), the resumed half at dispatch level
 * `resume_isa`.  At the level in use the losses and weights must be the
 * same bits; at another, the losses within relative `tol` (float rounding),
 * the weights not compared. */
static void check_resume(bf_job_config c, const char *name, bf_isa resume_isa,
                         double tol)
{
    bf_isa isa = bf_isa_current();
    c.steps = 40;
    c.warmup_steps = 5;
    c.checkpoint_every = 20;
    char full_dir[128], part_dir[128];
    snprintf(full_dir, sizeof full_dir, "%s/%s-full", dir, name);
    snprintf(part_dir, sizeof part_dir, "%s/%s-part", dir, name);
    mkdir(full_dir, 0777);
    mkdir(part_dir, 0777);

    record_log full = {json_array()}, first = {json_array()},
               second = {json_array()};
    run_job(&c, full_dir, NULL, &full, NULL);
    run_job(&c, part_dir, NULL, &first, stop_at_20);
    const json_t *done = json_array_get(first.records,
                                        json_array_size(first.records) - 1);
    assert_true(json_boolean_value(json_object_get(done, "stopped")));
    assert_int_equal(json_integer_value(json_object_get(done, "step")), 20);

    char resume[512];
    bf_error err;
    assert_int_equal(bf_checkpoint_latest(part_dir, resume, sizeof resume,
                                          &err), 1);
    assert_non_null(strstr(resume, "step-000020"));
    assert_int_equal(bf_isa_use(resume_isa, &err), 0);
    run_job(&c, part_dir, resume, &second, NULL);
    assert_int_equal(bf_isa_use(isa, &err), 0);

    double a[40], b[40];
    assert_int_equal(train_losses(&full, a, 40), 40);
    assert_int_equal(train_losses(&first, b, 40), 20);
    assert_int_equal(train_losses(&second, b + 20, 20), 20);
    for (int i = 0; i < 40; i++)
        if (resume_isa == isa ? memcmp(&a[i], &b[i], sizeof a[i]) != 0
                              : fabs(a[i] - b[i]) > tol * fabs(a[i]))
            fail_msg("step %d: loss %.17g uninterrupted at %s, %.17g "
                     "resumed at %s", i + 1, a[i], bf_isa_name(isa), b[i],
                     bf_isa_name(resume_isa));
    if (resume_isa != isa) {
        print_message("%s -> %s: last loss %.9g uninterrupted, %.9g "
                      "resumed\n", bf_isa_name(isa), bf_isa_name(resume_isa),
                      a[39], b[39]);
        json_decref(full.records);
        json_decref(first.records);
        json_decref(second.records);
        return;
    }
    /* The final checkpoints hold identical bytes of weights. */
    bf_checkpoint x, y;
    char px[256], py[256];
    bf_checkpoint_step_path(px, sizeof px, full_dir, 40);
    bf_checkpoint_step_path(py, sizeof py, part_dir, 40);
    assert_int_equal(bf_checkpoint_open(&x, px, &err), 0);
    assert_int_equal(bf_checkpoint_open(&y, py, &err), 0);
    const bf_st_tensor *tx = bf_st_find(x.file, "h.1.attn.rope.log_freq");
    const bf_st_tensor *ty = bf_st_find(y.file, "h.1.attn.rope.log_freq");
    assert_memory_equal(tx->data, ty->data, tx->nbytes);
    bf_checkpoint_close(&x);
    bf_checkpoint_close(&y);
    json_decref(full.records);
    json_decref(first.records);
    json_decref(second.records);
}

static void test_resume_is_bit_identical(void **state)
{
    (void)state;
    bf_job_config c;
    tiny_config(&c, BF_ROPE_SPECTRAL);
    check_resume(c, "spectral", bf_isa_current(), 0.0);
}

/* A checkpoint written at one dispatch level resumes at another: the run
 * goes on from the same state, its losses within float rounding of the
 * uninterrupted run's (the levels round differently, isa.h). */
static void test_resume_at_another_level(void **state)
{
    (void)state;
    bf_isa other = bf_isa_current() != BF_ISA_BASELINE ? BF_ISA_BASELINE
                                                        : bf_isa_best();
    if (other == bf_isa_current()) {
        print_message("only the baseline level runs on this CPU\n");
        skip();
    }
    bf_job_config c;
    tiny_config(&c, BF_ROPE_SPECTRAL);
    check_resume(c, "other-level", other, 1e-4);
}

/* Random positions are drawn from each example's key, not from a state
 * that a resumed run would lose. */
static void test_resume_with_random_positions(void **state)
{
    (void)state;
    bf_job_config c;
    tiny_config(&c, BF_ROPE_SPECTRAL);
    c.random_positions = 4 * c.seq_len;
    check_resume(c, "random", bf_isa_current(), 0.0);
}

/* Training sees random positions (its losses differ from 0..T-1's), while
 * evaluation sees 0..T-1 (the same weights score the same bits). */
static void test_random_positions_train_only(void **state)
{
    (void)state;
    bf_job_config plain, rnd;
    tiny_config(&plain, BF_ROPE_GEOMETRIC);
    rnd = plain;
    rnd.random_positions = 3 * plain.seq_len;
    bf_trainer_opts o = {.rank = 0, .nranks = 1};
    bf_trainer *tp, *tr;
    bf_error err;
    assert_int_equal(bf_trainer_create(&tp, &plain, &o, &err), 0);
    assert_int_equal(bf_trainer_create(&tr, &rnd, &o, &err), 0);
    bf_eval_result ep[1], er[1];
    bf_trainer_evaluate(tp, ep);
    bf_trainer_evaluate(tr, er);
    assert_memory_equal(&ep[0].loss, &er[0].loss, sizeof ep[0].loss);
    double lp, lr;
    bf_trainer_step(tp, &lp, NULL, NULL);
    bf_trainer_step(tr, &lr, NULL, NULL);
    print_message("first step loss: positions 0..T-1 %.9f, random %.9f\n",
                  lp, lr);
    assert_true(lp != lr);
    bf_trainer_free(tp);
    bf_trainer_free(tr);
}

/* A small dyck job that learns in 250 steps. */
static void dyck_config(bf_job_config *c)
{
    bf_job_config_defaults(c);
    c->task = BF_TASK_DYCK;
    c->depth = 4;
    c->eval_depths[0] = 4;
    c->n_eval_depths = 1;
    c->rope = BF_ROPE_BIFOCAL;
    c->d_model = 32;
    c->n_layers = 2;
    c->n_heads = 4;
    c->seq_len = 20;
    c->batch_size = 16;
    c->steps = 250;
    c->warmup_steps = 20;
    c->lr = 1e-2;
    c->weight_decay = 0.0;
    c->log_every = 50;
    c->eval_every = 0;
    c->freq_every = 0;
    c->eval_examples = 64;
}

static void test_learns_dyck(void **state)
{
    (void)state;
    bf_job_config c;
    dyck_config(&c);
    bf_error err;
    assert_int_equal(bf_job_config_validate(&c, &err), 0);
    record_log rec = {json_array()};
    run_job(&c, NULL, NULL, &rec, NULL);
    double losses[8];
    int n = train_losses(&rec, losses, 8);
    assert_int_equal(n, 5);
    double chance = log((double)bf_vocab_size(&c));
    const json_t *done = json_array_get(rec.records,
                                        json_array_size(rec.records) - 1);
    const json_t *ev = json_array_get(json_object_get(done, "eval"), 0);
    double eval_loss = json_real_value(json_object_get(ev, "loss"));
    double acc = json_real_value(json_object_get(ev, "accuracy"));
    print_message("dyck depth 4: first logged loss %.4f, final %.4f, eval "
                  "loss %.4f, exact match %.3f (chance %.4f)\n", losses[0],
                  losses[n - 1], eval_loss, acc, chance);
    assert_true(losses[n - 1] < 0.5 * chance);
    assert_true(eval_loss < 0.5 * chance);
    check_outcomes_follow_evals(&rec, c.eval_examples);
    json_decref(rec.records);
}

/* ---- two ranks in one process ------------------------------------------------ */

/* A sum-allreduce over two threads: each copies its buffer in, waits, then
 * both read the sum.  The three barriers keep rounds from overlapping. */
typedef struct fake_group {
    pthread_barrier_t barrier;
    float *slots[2];
} fake_group;

typedef struct rank_ctx {
    fake_group *group;
    int rank;
    bf_trainer *trainer;
    double losses[12];
    bf_eval_result eval[1];
} rank_ctx;

static void fake_allreduce(void *ctx, float *buf, size_t n)
{
    rank_ctx *r = ctx;
    fake_group *g = r->group;
    g->slots[r->rank] = buf;
    pthread_barrier_wait(&g->barrier);
    float *sum = malloc(n * sizeof *sum);
    for (size_t i = 0; i < n; i++)
        sum[i] = g->slots[0][i] + g->slots[1][i];
    pthread_barrier_wait(&g->barrier);   /* both have read both slots */
    memcpy(buf, sum, n * sizeof *sum);
    free(sum);
    pthread_barrier_wait(&g->barrier);
}

static void *rank_main(void *arg)
{
    rank_ctx *r = arg;
    for (int s = 0; s < 12; s++)
        bf_trainer_step(r->trainer, &r->losses[s], NULL, NULL);
    return NULL;
}

static void *rank_eval_main(void *arg)
{
    rank_ctx *r = arg;
    bf_trainer_evaluate(r->trainer, r->eval);
    return NULL;
}

/* Runs fn on both ranks concurrently. */
static void run_ranks(rank_ctx *ranks, void *(*fn)(void *))
{
    pthread_t th[2];
    for (int r = 0; r < 2; r++)
        pthread_create(&th[r], NULL, fn, &ranks[r]);
    for (int r = 0; r < 2; r++)
        pthread_join(th[r], NULL);
}

/* Trains a tiny job (12 steps) in one process and in two ranks: the same
 * losses up to float summation order, the two replicas bitwise identical,
 * and a split evaluation equal to the whole. */
static void check_two_ranks_match_one(bf_rope_kind rope, int batch_size,
                                      int random_positions)
{
    bf_job_config cfg;
    tiny_config(&cfg, rope);
    cfg.batch_size = batch_size;
    cfg.random_positions = random_positions;
    const bf_job_config *c = &cfg;
    bf_error err;
    bf_trainer *single;
    bf_trainer_opts one = {.rank = 0, .nranks = 1};
    assert_int_equal(bf_trainer_create(&single, c, &one, &err), 0);
    double want[12];
    for (int s = 0; s < 12; s++)
        bf_trainer_step(single, &want[s], NULL, NULL);

    fake_group g;
    pthread_barrier_init(&g.barrier, NULL, 2);
    rank_ctx ranks[2];
    for (int r = 0; r < 2; r++) {
        ranks[r] = (rank_ctx){.group = &g, .rank = r};
        bf_trainer_opts o = {.rank = r, .nranks = 2,
                             .hooks = {.ctx = &ranks[r],
                                       .allreduce_sum = fake_allreduce}};
        assert_int_equal(bf_trainer_create(&ranks[r].trainer, c, &o, &err),
                         0);
    }
    run_ranks(ranks, rank_main);

    for (int s = 0; s < 12; s++) {
        assert_true(ranks[0].losses[s] == ranks[1].losses[s]);
        if (fabs(ranks[0].losses[s] - want[s]) > 1e-5 * want[s])
            fail_msg("batch %d step %d: 2 ranks %.9g, 1 rank %.9g",
                     c->batch_size, s + 1, ranks[0].losses[s], want[s]);
    }
    bf_model *m0 = bf_trainer_model(ranks[0].trainer);
    bf_model *m1 = bf_trainer_model(ranks[1].trainer);
    bf_model *ms = bf_trainer_model(single);
    assert_memory_equal(m0->params_memory, m1->params_memory,
                        m0->num_params * sizeof(float));
    double max_diff = 0;
    for (size_t i = 0; i < ms->num_params; i++)
        max_diff = fmax(max_diff, fabs(m0->params_memory[i] -
                                       ms->params_memory[i]));
    print_message("batch %d on 2 ranks: largest weight difference to 1 rank "
                  "%.2e\n", c->batch_size, max_diff);
    assert_true(max_diff < 1e-4);
    /* A split evaluation (8 examples, 4 per rank) sums to the whole. */
    memcpy(ms->params_memory, m0->params_memory,
           ms->num_params * sizeof(float));
    bf_eval_result whole[1];
    bf_trainer_evaluate(single, whole);
    run_ranks(ranks, rank_eval_main);
    size_t nbytes = BF_OUTCOMES_BYTES(c->eval_examples);
    const unsigned char *want_bits = bf_trainer_outcomes(single, 0);
    for (int r = 0; r < 2; r++) {
        assert_int_equal(ranks[r].eval[0].depth, 3);
        assert_float_equal(ranks[r].eval[0].loss, whole[0].loss,
                           1e-5 * whole[0].loss);
        assert_float_equal(ranks[r].eval[0].accuracy, whole[0].accuracy,
                           1e-9);
        /* ... and so do its outcomes, example by example: each rank's
         * half is merged into every rank's. */
        assert_memory_equal(bf_trainer_outcomes(ranks[r].trainer, 0),
                            want_bits, nbytes);
    }

    for (int r = 0; r < 2; r++)
        bf_trainer_free(ranks[r].trainer);
    bf_trainer_free(single);
    pthread_barrier_destroy(&g.barrier);
}

/* The outcomes of a model that gets some examples right, evaluated by two
 * ranks that split the examples mid-byte (61 examples: 30 and 31), are
 * the single process's, bit for bit. */
static void test_split_outcomes(void **state)
{
    (void)state;
    bf_job_config c;
    dyck_config(&c);
    c.steps = 150;
    c.eval_examples = 61;
    bf_error err;
    bf_trainer *single;
    bf_trainer_opts one = {.rank = 0, .nranks = 1};
    assert_int_equal(bf_trainer_create(&single, &c, &one, &err), 0);
    for (int s = 0; s < c.steps; s++)
        bf_trainer_step(single, NULL, NULL, NULL);
    bf_eval_result whole[1];
    bf_trainer_evaluate(single, whole);
    const unsigned char *want = bf_trainer_outcomes(single, 0);
    int right = 0;
    for (int e = 0; e < c.eval_examples; e++)
        right += want[e / 8] >> (e % 8) & 1;
    print_message("%d of %d examples right\n", right, c.eval_examples);
    assert_true(right > 0 && right < c.eval_examples);
    assert_float_equal(whole[0].accuracy, (double)right / c.eval_examples,
                       1e-12);

    fake_group g;
    pthread_barrier_init(&g.barrier, NULL, 2);
    rank_ctx ranks[2];
    bf_model *ms = bf_trainer_model(single);
    for (int r = 0; r < 2; r++) {
        ranks[r] = (rank_ctx){.group = &g, .rank = r};
        bf_trainer_opts o = {.rank = r, .nranks = 2,
                             .hooks = {.ctx = &ranks[r],
                                       .allreduce_sum = fake_allreduce}};
        assert_int_equal(bf_trainer_create(&ranks[r].trainer, &c, &o, &err),
                         0);
        memcpy(bf_trainer_model(ranks[r].trainer)->params_memory,
               ms->params_memory, ms->num_params * sizeof(float));
    }
    run_ranks(ranks, rank_eval_main);
    for (int r = 0; r < 2; r++) {
        assert_memory_equal(bf_trainer_outcomes(ranks[r].trainer, 0), want,
                            BF_OUTCOMES_BYTES(c.eval_examples));
        bf_trainer_free(ranks[r].trainer);
    }
    bf_trainer_free(single);
    pthread_barrier_destroy(&g.barrier);
}

static void test_two_ranks_match_one(void **state)
{
    (void)state;
    check_two_ranks_match_one(BF_ROPE_BIFOCAL, 6, 0);
}

/* 5 rows on 2 ranks: 3 and 2, the mean still over all targets. */
static void test_uneven_split_matches_one(void **state)
{
    (void)state;
    check_two_ranks_match_one(BF_ROPE_BIFOCAL, 5, 0);
}

/* 1 row on 2 ranks: rank 1 has none and still joins every allreduce; with
 * random positions and p-RoPE, so the data split is checked with them. */
static void test_rank_without_rows(void **state)
{
    (void)state;
    check_two_ranks_match_one(BF_ROPE_PROPE, 1, 32);
}

int main(void)
{
    int isa_status = test_isa_from_env();
    if (isa_status != 0)
        return isa_status;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lr_schedule),
        cmocka_unit_test(test_records_schedule),
        cmocka_unit_test(test_time_parts),
        cmocka_unit_test(test_resume_is_bit_identical),
        cmocka_unit_test(test_resume_with_random_positions),
        cmocka_unit_test(test_resume_at_another_level),
        cmocka_unit_test(test_random_positions_train_only),
        cmocka_unit_test(test_two_ranks_match_one),
        cmocka_unit_test(test_split_outcomes),
        cmocka_unit_test(test_uneven_split_matches_one),
        cmocka_unit_test(test_rank_without_rows),
        cmocka_unit_test(test_learns_dyck),
    };
    return cmocka_run_group_tests(tests, scratch_setup, scratch_teardown);
}
