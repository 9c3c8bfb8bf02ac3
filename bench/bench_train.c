/* Training-step benchmark of the C model, side by side with PyTorch, and
 * the targets of issue 17 checked in the same run.
 *
 *   bench_train [--torch PATH/torch_ref.py] [--native PATH/bench_train]
 *               [--steps N] [--rounds R] [--config NAME]
 *
 * Measures the single-thread cblas_sgemm peak of the OpenBLAS kernels the
 * picked level runs (again every round: MFU is against the best seen so
 * far), then for each config runs, each in a fresh process (so peak RSS
 * is that config's alone): the portable binary at the level it picks by
 * itself, at every dispatch level this CPU runs (BIFOCAL_ISA, engine/isa.h,
 * each with the OpenBLAS kernels it pins), with --native the bench_train
 * of a -Dmarch=native build, and with --torch the fast PyTorch model of the
 * same architecture (torch_ref.py --bench: forward_fast, which
 * test_torch_fast holds to the C model's loss and gradients), with ATen's
 * kernels at the widest level (ATEN_CPU_CAPABILITY) and OpenBLAS's as this
 * program runs them.  A set OPENBLAS_CORETYPE overrides the pin of the
 * picked run and of PyTorch's (some machines' images set one: unset it in
 * the command to measure the kernels each level would pick).  The
 * variants alternate for R rounds (default 3), so that load from elsewhere
 * on a shared machine hits all alike, and each prints its median.  One
 * step = zero_grad, forward + backward over micro-batches of
 * bf_model_size_micro_batch rows, grad_norm, AdamW; a run reports its best step
 * (the least disturbed; PyTorch is timed the same way).  Prints tokens/s,
 * peak RSS, MFU (model FLOPs/s over the sgemm peak), the ratios of the
 * medians against the portable pick, and the targets, each the median of
 * the rounds' own ratios (paired_ratio) with their range: portable within
 * 5% of native (every config), at least 3x PyTorch on the study size and
 * 1.6x on config A, config A at least 85% MFU (CONFIGS; each round's MFU
 * its child's, against a peak measured between its steps: paired_mfu).
 * --config runs one config (study, A or B) instead of all three.
 *
 *   bench_train --child NAME STEPS   (internal: one config, one process,
 *                                     at the level BIFOCAL_ISA names) */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "alloc.h"
#include "clock.h"
#include "isa.h"
#include "model.h"
#include "rng.h"
#include "tasks.h"

typedef struct bench_config {
    const char *name;
    int d_model, n_layers, n_heads, seq_len, batch;
    bf_rope_kind rope; /* spectral: every head; bifocal: half of them */
    int steps;         /* timed steps at --steps 1 scale */
    /* issue 17's targets (0: none): portable / PyTorch, portable MFU % */
    double want_vs_torch, want_mfu;
} bench_config;

/* "study": the size the studies train (configs/study-*.yaml), where the
 * elementwise passes, not the matrix products, decide the speed. */
static const bench_config CONFIGS[] = {
    {"study", 64, 2, 4, 40, 32, BF_ROPE_SPECTRAL, 40, 3.0, 0},
    {"A", 128, 4, 4, 64, 32, BF_ROPE_BIFOCAL, 10, 1.6, 85.0},
    {"B", 256, 4, 4, 128, 16, BF_ROPE_BIFOCAL, 6, 0, 0},
};
enum { N_CONFIGS = sizeof CONFIGS / sizeof CONFIGS[0] };

/* The peak's product: 1024^3 on operands allocated as the model's arenas
 * are (aligned, huge pages), so that the peak is OpenBLAS's best, not one
 * slowed by loads across lines. */
enum { PEAK_S = 1024 };
typedef struct peak_operands {
    float *a, *b, *c;
} peak_operands;

static peak_operands peak_operands_create(void)
{
    size_t n = (size_t)PEAK_S * PEAK_S;
    peak_operands o = {bf_xcalloc_arena(sizeof(float) * n),
                       bf_xcalloc_arena(sizeof(float) * n),
                       bf_xcalloc_arena(sizeof(float) * n)};
    for (size_t i = 0; i < n; i++) {
        o.a[i] = (float)(i % 13) * 0.01f;
        o.b[i] = (float)(i % 7) * 0.01f;
    }
    return o;
}

static void peak_operands_free(peak_operands *o)
{
    free(o->a);
    free(o->b);
    free(o->c);
}

/* Seconds one sgemm of the peak's product takes. */
static double peak_product_seconds(const peak_operands *o)
{
    double t0 = bf_now_seconds();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, PEAK_S, PEAK_S,
                PEAK_S, 1.0f, o->a, PEAK_S, o->b, PEAK_S, 0.0f, o->c, PEAK_S);
    return bf_now_seconds() - t0;
}

static double peak_product_flops(double seconds)
{
    return 2.0 * PEAK_S * PEAK_S * PEAK_S / seconds;
}

/* The least of best and the seconds of n of the peak's products in a
 * row. */
static double peak_products_best(const peak_operands *o, int n, double best)
{
    for (int i = 0; i < n; i++) {
        double dt = peak_product_seconds(o);
        best = dt < best ? dt : best;
    }
    return best;
}

/* Best of PEAK_PRODUCTS of the peak's products in a row: what one core
 * can do at best (on a shared machine the best run is the one least
 * disturbed). */
enum { PEAK_PRODUCTS = 20 };
static double sgemm_peak_flops(void)
{
    peak_operands o = peak_operands_create();
    double best = peak_products_best(&o, PEAK_PRODUCTS, 1e30);
    peak_operands_free(&o);
    return peak_product_flops(best);
}

/* The dyck task's vocabulary with default settings. */
static int dyck_vocab(void)
{
    bf_job_config cfg;
    bf_job_config_defaults(&cfg);
    cfg.task = BF_TASK_DYCK;
    return bf_vocab_size(&cfg);
}

static bf_model_shape shape_of(const bench_config *bc)
{
    bf_model_shape s = {.vocab = dyck_vocab(), .d_model = bc->d_model,
                        .n_layers = bc->n_layers, .n_heads = bc->n_heads,
                        .max_seq = bc->seq_len, .rope = bc->rope,
                        .rope_base = 10000.0,
                        .spectral_heads = bc->rope == BF_ROPE_SPECTRAL
                                              ? bc->n_heads
                                              : bc->n_heads / 2};
    return s;
}

/* What one training step of the child runs on: the batch, in micro-batches
 * of mb rows. */
typedef struct train_batch {
    bf_model *m;
    const bf_adamw_hparams *hp;
    const int *in, *tg;
    int rows, T, mb;
} train_batch;

/* One step (the optimizer's step number `step`): zero_grad, forward and
 * backward over the micro-batches, grad_norm, AdamW.  Returns the norm. */
static double train_step(const train_batch *tb, int step)
{
    int T = tb->T;
    bf_model_zero_grad(tb->m);
    for (int row = 0; row < tb->rows; row += tb->mb) {
        int b = tb->rows - row < tb->mb ? tb->rows - row : tb->mb, n;
        bf_model_forward(tb->m, tb->in + row * T, tb->tg + row * T, NULL, b,
                         T, &n);
        bf_model_backward(tb->m, 1.0f / (float)(tb->rows * T));
    }
    double norm = bf_model_grad_norm(tb->m); /* the trainer clips with it */
    bf_adamw_step(tb->m, tb->hp, step, 1.0f);
    return norm;
}

/* MFU with its peak measured alongside: n pairs of steps (numbered from
 * after_step + 1), each pair followed by PAIRED_PRODUCTS of the peak's
 * products back to back, then PEAK_PRODUCTS in a row; prints the best of
 * the pairs' second steps and of all the products, and returns the one
 * against the other, in %.  Both see the machine in the same seconds,
 * where a peak measured by the parent between runs may see another (a
 * neighbour's load on a shared host comes and goes within a round).  Only
 * the second step of a pair is timed: the first finds the model's data
 * evicted by the products (timed right after them, the step read 1 to 4%
 * slower).  The products in a row are sgemm_peak_flops's: after
 * steps alone, the products' best read up to 2% below them, which would
 * have flattered the MFU. */
enum { PAIRED_PRODUCTS = 3 };
static double paired_mfu(const train_batch *tb, int after_step, int n,
                         double flops_per_step)
{
    peak_operands o = peak_operands_create();
    double step_best = 1e30, product_best = 1e30;
    int step = after_step;
    for (int i = 0; i < n; i++) {
        train_step(tb, ++step);
        double t0 = bf_now_seconds();
        train_step(tb, ++step);
        double dt = bf_now_seconds() - t0;
        step_best = dt < step_best ? dt : step_best;
        product_best = peak_products_best(&o, PAIRED_PRODUCTS, product_best);
    }
    product_best = peak_products_best(&o, PEAK_PRODUCTS, product_best);
    peak_operands_free(&o);
    double peak = peak_product_flops(product_best);
    printf(" paired_step_ms=%.3f paired_peak_gflops=%.1f", step_best * 1e3,
           peak / 1e9);
    return 100.0 * flops_per_step / step_best / peak;
}

/* One config in this process; prints key=value figures for the parent. */
static int run_child(const bench_config *bc, int steps)
{
    bf_error err;
    if (bf_isa_use_env(&err) != 0) {
        fprintf(stderr, "bench_train: %s\n", err.msg);
        return 1;
    }
    bf_model_shape s = shape_of(bc);
    int T = bc->seq_len, rows = bc->batch;
    int mb = bf_model_size_micro_batch(&s, rows, T);
    bf_model m;
    if (bf_model_create(&m, &s, mb, T, &err) < 0) {
        fprintf(stderr, "bench_train: %s\n", err.msg);
        return 1;
    }
    bf_model_init_weights(&m, 1);
    int *in = bf_xmalloc(sizeof(int) * rows * T);
    int *tg = bf_xmalloc(sizeof(int) * rows * T);
    bf_rng r;
    bf_rng_seed(&r, 2);
    for (int i = 0; i < rows * T; i++) {
        in[i] = (int)bf_rng_below(&r, (uint32_t)s.vocab);
        tg[i] = (int)bf_rng_below(&r, (uint32_t)s.vocab);
    }
    bf_adamw_hparams hp = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f,
                           .eps = 1e-8f, .weight_decay = 0.1f,
                           .freq_lr_mult = 1.0f};
    /* the best step, like the best sgemm for the peak: on a shared machine
     * the least disturbed run (torch_ref.py reports its best the same way) */
    train_batch tb = {&m, &hp, in, tg, rows, T, mb};
    double norm_sum = 0, dt = 1e30;
    const int warmup = 2;
    for (int step = 1; step <= warmup + steps; step++) {
        double t0 = bf_now_seconds();
        norm_sum += train_step(&tb, step);
        if (step > warmup && bf_now_seconds() - t0 < dt)
            dt = bf_now_seconds() - t0;
    }
    struct rusage ru; /* before the peak's operands below */
    getrusage(RUSAGE_SELF, &ru);
    double tokens = (double)rows * T;
    double flops_per_step = bf_model_train_flops(&s, T, tokens);
    printf("isa=%s/%s micro_batch=%d step_ms=%.3f tokens_per_s=%.1f "
           "flops_per_s=%.6g rss_mib=%.1f params=%zu grad_norm=%.4g",
           bf_isa_name(bf_isa_current()), bf_isa_blas_core_in_use(), mb,
           dt * 1e3,
           tokens / dt, flops_per_step / dt,
           ru.ru_maxrss / 1024.0, m.num_params, norm_sum / (warmup + steps));
    if (bc->want_mfu > 0) {
        double mfu = paired_mfu(&tb, warmup + steps, steps, flops_per_step);
        printf(" mfu=%.2f", mfu);
    }
    printf("\n");
    free(in);
    free(tg);
    bf_model_free(&m);
    return 0;
}

/* Runs cmd and returns the number after `key` in its output, or -1. */
static double run_and_read(const char *cmd, const char *key, char *line,
                           size_t cap)
{
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    double value = -1;
    char buf[1024];
    while (fgets(buf, sizeof buf, p)) {
        char *at = strstr(buf, key);
        if (at) {
            value = atof(at + strlen(key));
            snprintf(line, cap, "%s", buf);
        }
    }
    if (pclose(p) != 0)
        return -1;
    return value;
}

static double field(const char *line, const char *key)
{
    const char *at = strstr(line, key);
    return at ? atof(at + strlen(key)) : -1;
}

enum { MAX_ROUNDS = 15 };

/* One thing timed on a config, once per round: a dispatch level of this
 * binary, the native build's pick, or PyTorch. */
typedef struct variant {
    char label[24];
    char isa[32];        /* level/OpenBLAS core it ran at ("-": PyTorch) */
    char cmd[2048];      /* prints `key` and the figures */
    const char *key;     /* "tokens_per_s=" or PyTorch's */
    double tps[MAX_ROUNDS];
    int n;               /* rounds that ran */
    double rss_mib;      /* of the last round (C runs) */
    double mfu[MAX_ROUNDS]; /* each round's, against its own peak (configs
                               with an MFU target), else -1 */
} variant;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of n values (sorted in place), their least and greatest in
 * *lo and *hi (may be NULL). */
static double median_of(double *x, int n, double *lo, double *hi)
{
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    if (lo)
        *lo = x[0];
    if (hi)
        *hi = x[n - 1];
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

/* The median of v's rounds, or -1 when one failed. */
static double median(const variant *v, int rounds)
{
    if (v->n < rounds)
        return -1;
    double sorted[MAX_ROUNDS];
    memcpy(sorted, v->tps, sizeof(double) * (size_t)rounds);
    return median_of(sorted, rounds, NULL, NULL);
}

/* a against b, round by round: the median of the rounds' ratios a / b,
 * with their least and greatest in *lo and *hi; -1 when a round of either
 * failed.  Each round ran the two minutes apart at most, so a round's
 * ratio sees the same load on both, where the ratio of the two medians
 * may pair a quiet round of one with a disturbed one of the other. */
static double paired_ratio(const variant *a, const variant *b, int rounds,
                           double *lo, double *hi)
{
    if (a->n < rounds || b->n < rounds)
        return -1;
    double r[MAX_ROUNDS];
    for (int i = 0; i < rounds; i++)
        r[i] = a->tps[i] / b->tps[i];
    return median_of(r, rounds, lo, hi);
}

static void run_round(variant *v)
{
    char line[1024] = "";
    double tps = run_and_read(v->cmd, v->key, line, sizeof line);
    if (tps <= 0)
        return;
    v->mfu[v->n] = field(line, "mfu=");
    v->tps[v->n++] = tps;
    const char *isa = strstr(line, "isa=");
    if (isa)
        snprintf(v->isa, sizeof v->isa, "%.*s", (int)strcspn(isa + 4, " \n"),
                 isa + 4);
    v->rss_mib = field(line, "rss_mib=");
}

/* Adds the C run of `bin` at level isa, with OpenBLAS pinned to the
 * level's core (BF_ISA_COUNT: the level it picks, in the environment this
 * program got). */
static variant *add_c(variant *vs, int *n, const char *label, const char *bin,
                      const bench_config *bc, int steps, bf_isa isa)
{
    variant *v = &vs[(*n)++];
    memset(v, 0, sizeof *v);
    snprintf(v->label, sizeof v->label, "%s", label);
    if (isa == BF_ISA_COUNT)
        snprintf(v->cmd, sizeof v->cmd, "'%s' --child %s %d", bin, bc->name,
                 steps);
    else
        snprintf(v->cmd, sizeof v->cmd,
                 "BIFOCAL_ISA=%s OPENBLAS_CORETYPE=%s '%s' --child %s %d",
                 bf_isa_name(isa), bf_isa_blas_core(isa), bin, bc->name,
                 steps);
    v->key = "tokens_per_s=";
    return v;
}

static variant *add_torch(variant *vs, int *n, const char *script,
                          const bench_config *bc, int steps)
{
    variant *v = &vs[(*n)++];
    memset(v, 0, sizeof *v);
    snprintf(v->label, sizeof v->label, "PyTorch, fast");
    snprintf(v->isa, sizeof v->isa, "-");
    /* PyTorch at its best too: ATen's kernels at the widest level (its
     * own pick on the test machine was AVX2 on an AVX-512 CPU, at half the
     * speed on the study's size), OpenBLAS's as this program runs them */
    static const char *const aten[BF_ISA_COUNT] = {
        [BF_ISA_BASELINE] = "default", [BF_ISA_AVX2] = "avx2",
        [BF_ISA_AVX512] = "avx512"};
    snprintf(v->cmd, sizeof v->cmd,
             "OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 ATEN_CPU_CAPABILITY=%s "
             "/usr/bin/python3 '%s' --bench %d %d %d %d %d %d %d %s",
             aten[bf_isa_best()], script, bc->d_model,
             bc->n_layers, bc->n_heads, bc->seq_len, bc->batch, dyck_vocab(),
             steps, bc->rope == BF_ROPE_SPECTRAL ? "spectral" : "bifocal");
    v->key = "torch_tokens_per_s ";
    return v;
}

/* One line per variant: median tokens/s, the rounds, MFU of C runs. */
static void print_variant(const variant *v, int rounds, double base,
                          double flops_per_token, double peak)
{
    double tps = median(v, rounds);
    if (tps < 0) {
        printf("  %-18s failed (%d of %d rounds ran): %s\n", v->label, v->n,
               rounds, v->cmd);
        return;
    }
    printf("  %-18s %-15s %9.0f tokens/s", v->label, v->isa, tps);
    if (v->rss_mib > 0)
        printf("  RSS %5.1f MiB  MFU %5.1f%%", v->rss_mib,
               100.0 * tps * flops_per_token / peak);
    else
        printf("  %26s", "");
    printf("  x%.2f  [", tps / base);
    for (int r = 0; r < rounds; r++)
        printf("%s%.0f", r ? " " : "", v->tps[r]);
    printf("]\n");
}

/* A target line: `what` (the median of the rounds' values, their range
 * lo..hi; negative: not measured, a round failed) against `want` (>= want
 * holds). */
static int print_target(const char *config, const char *what, double ratio,
                        double lo, double hi, double want, const char *unit)
{
    if (ratio < 0) {
        printf("  target %-6s %-30s (>= %.3g%s): not measured\n", config,
               what, want, unit);
        return 0;
    }
    int holds = ratio >= want;
    printf("  target %-6s %-30s %7.3f%s (rounds %.3g to %.3g; >= %.3g%s): "
           "%s\n", config, what, ratio, unit, lo, hi, want, unit,
           holds ? "holds" : "MISSES");
    return holds;
}

typedef struct bench_opts {
    const char *self, *torch, *native;
    int scale, rounds;
} bench_opts;

/* Every variant of config bc, the rounds alternating between them (so a
 * burst of load from elsewhere hits all alike); prints medians, then the
 * issue's targets for this config.  Returns how many targets missed. */
static int bench_config_run(const bench_config *bc, const bench_opts *o,
                            double *peak)
{
    int steps = bc->steps * o->scale, n = 0;
    variant vs[3 + BF_ISA_COUNT];
    variant *pick = add_c(vs, &n, "portable, picked", o->self, bc, steps,
                          BF_ISA_COUNT);
    for (int l = 0; l < BF_ISA_COUNT; l++)
        if (bf_isa_supported((bf_isa)l))
            add_c(vs, &n, "portable, forced", o->self, bc, steps, (bf_isa)l);
    variant *native = o->native ? add_c(vs, &n, "-Dmarch=native", o->native,
                                        bc, steps, BF_ISA_COUNT) : NULL;
    variant *torch = o->torch ? add_torch(vs, &n, o->torch, bc, steps) : NULL;
    for (int r = 0; r < o->rounds; r++) {
        for (int i = 0; i < n; i++)
            run_round(&vs[i]);
        /* the peak too, once per round: the best seen so far is the one
         * least disturbed by load from elsewhere */
        double p = sgemm_peak_flops();
        *peak = p > *peak ? p : *peak;
    }

    bf_model_shape s = shape_of(bc);
    double fpt = bf_model_train_flops(&s, bc->seq_len, 1.0);
    printf("config %s (d_model %d, %d layers, %d heads, seq %d, batch %d, "
           "%s, V %d): median of %d alternated rounds, %d steps each (best "
           "step)\n", bc->name, bc->d_model, bc->n_layers, bc->n_heads,
           bc->seq_len, bc->batch,
           bc->rope == BF_ROPE_SPECTRAL ? "spectral" : "bifocal", s.vocab,
           o->rounds, steps);
    double base = median(pick, o->rounds);
    if (base < 0) {
        printf("  portable build failed: %s\n", pick->cmd);
        return 1;
    }
    printf("  (MFU against the best sgemm peak so far: %.1f GFLOP/s)\n",
           *peak / 1e9);
    for (int i = 0; i < n; i++)
        print_variant(&vs[i], o->rounds, base, fpt, *peak);

    /* The forced run of the picked level is the same code as the pick:
     * how far apart their medians are is this run's noise. */
    for (int i = 1; i < n; i++)
        if (!strcmp(vs[i].isa, pick->isa) && strstr(vs[i].label, "forced"))
            printf("  noise: picked and forced %s are the same code; their "
                   "medians differ x%.2f\n", pick->isa,
                   median(&vs[i], o->rounds) / base);
    int missed = 0;
    double lo = -1, hi = -1;
    if (native) {
        double r = paired_ratio(pick, native, o->rounds, &lo, &hi);
        missed += !print_target(bc->name, "portable / -Dmarch=native", r, lo,
                                hi, 0.95, "x");
    }
    if (torch && bc->want_vs_torch > 0) {
        double r = paired_ratio(pick, torch, o->rounds, &lo, &hi);
        missed += !print_target(bc->name, "portable / PyTorch", r, lo, hi,
                                bc->want_vs_torch, "x");
    }
    if (bc->want_mfu > 0) {
        double mfu[MAX_ROUNDS], m = -1;   /* -1: a round failed */
        memcpy(mfu, pick->mfu, sizeof mfu);
        if (pick->n == o->rounds)
            m = median_of(mfu, o->rounds, &lo, &hi);
        missed += !print_target(bc->name, "portable MFU (paired peak)", m,
                                lo, hi, bc->want_mfu, "%");
    }
    return missed;
}

int main(int argc, char **argv)
{
    openblas_set_num_threads(1);
    if (argc == 4 && !strcmp(argv[1], "--child")) {
        for (int i = 0; i < N_CONFIGS; i++)
            if (!strcmp(argv[2], CONFIGS[i].name))
                return run_child(&CONFIGS[i], atoi(argv[3]));
        return 2;
    }
    bench_opts o = {.scale = 1, .rounds = 3};
    const char *only = NULL; /* --config: one config's name */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--torch") && i + 1 < argc)
            o.torch = argv[++i];
        else if (!strcmp(argv[i], "--native") && i + 1 < argc)
            o.native = argv[++i];
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc)
            o.scale = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            o.rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--config") && i + 1 < argc)
            only = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--torch torch_ref.py] "
                    "[--native native-build/bench/bench_train] [--steps N] "
                    "[--rounds R] [--config study|A|B]\n", argv[0]);
            return 2;
        }
    }
    int known = !only;
    for (int i = 0; only && i < N_CONFIGS; i++)
        known |= !strcmp(only, CONFIGS[i].name);
    if (!known) {
        fprintf(stderr, "bench_train: --config: unknown config '%s' (study, "
                "A or B)\n", only);
        return 2;
    }
    if (o.scale < 1 || o.rounds < 1 || o.rounds > MAX_ROUNDS) {
        fprintf(stderr, "bench_train: --steps must be >= 1 and --rounds in "
                "1..%d\n", MAX_ROUNDS);
        return 2;
    }
    char self[1024];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n < 0)
        return 1;
    self[n] = '\0';
    o.self = self;

    /* Best of 20 sgemms now and once per round of every config: on a
     * shared machine the best is the one least disturbed by load */
    double peak = sgemm_peak_flops();
    printf("sgemm peak, 1 thread, 1024^3, OpenBLAS %s: %.1f GFLOP/s (before "
           "the runs)\n", bf_isa_blas_core_in_use(), peak / 1e9);
    printf("portable build picks %s/%s; ratios (x) are against its median, "
           "measured in this run; [the rounds' tokens/s]; a target is the "
           "median of the rounds' ratios\n",
           bf_isa_name(bf_isa_current()), bf_isa_blas_core_in_use());
    int missed = 0;
    for (int i = 0; i < N_CONFIGS; i++)
        if (!only || !strcmp(only, CONFIGS[i].name))
            missed += bench_config_run(&CONFIGS[i], &o, &peak);
    printf("best sgemm peak of the run: %.1f GFLOP/s\n", peak / 1e9);
    printf("%d target%s missed%s\n", missed, missed == 1 ? "" : "s",
           o.native && o.torch ? "" : " (without --native and --torch some "
           "were not measured)");
    return 0;
}
