/* The linear layers' products alone: the level's own gemm (engine/gemm.h)
 * against OpenBLAS's sgemm on the same product, for the three products a
 * linear layer makes (forward out = inp @ w, backward dinp = dout @ w^T
 * and dw += inp^T @ dout) at the shapes of the study, config A and
 * config B (bench_train's; rows = micro-batch x sequence).  Each (shape,
 * product, side) is timed once a round for ROUNDS rounds (default 5),
 * alternating own and OpenBLAS, each round the best of a few calls; prints
 * the medians in GFLOP/s and own / OpenBLAS, and checks the two agree to
 * float rounding (exit 1 when not).  The operands are allocated as the
 * model's arenas are (bf_xcalloc_arena: cache-line aligned).
 *
 *   bench_gemm [ROUNDS [ROWS]]  (at the level BIFOCAL_ISA names or the
 *                                best, with the OpenBLAS kernels it pins
 *                                or OPENBLAS_CORETYPE names; ROWS, every
 *                                shape at that many rows instead: e.g. a
 *                                micro-batch's, 128 for config A) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <cblas.h>

#include "alloc.h"
#include "clock.h"
#include "isa.h"
#include "layers.h"
#include "rng.h"

typedef struct gemm_shape {
    const char *config;
    int rows, C, OC; /* a layer from C to OC channels over rows rows */
} gemm_shape;

/* Each config's four layers: qkv, the attention's projection, the MLP's
 * two. */
static const gemm_shape SHAPES[] = {
    {"study", 1280, 64, 192},  {"study", 1280, 64, 64},
    {"study", 1280, 64, 256},  {"study", 1280, 256, 64},
    {"A", 1024, 128, 384},     {"A", 1024, 128, 128},
    {"A", 1024, 128, 512},     {"A", 1024, 512, 128},
    {"B", 2048, 256, 768},     {"B", 2048, 256, 256},
    {"B", 2048, 256, 1024},    {"B", 2048, 1024, 256},
};
enum {
    N_SHAPES = sizeof SHAPES / sizeof SHAPES[0],
    CALLS = 5,
    MAX_ROUNDS = 64
};

typedef enum { FORWARD, DINP, DW, N_PRODUCTS } product;
static const char *const PRODUCT_NAMES[] = {"forward", "dinp", "dw"};

typedef struct operands {
    float *inp, *w, *out, *dout, *dinp, *dw;
} operands;

static float *random_floats(bf_rng *r, size_t n)
{
    float *x = bf_xcalloc_arena(n * sizeof *x);
    bf_rng_fill_signed(r, x, n);
    return x;
}

/* One product p of shape s into its output, by the level's gemm (own) or
 * OpenBLAS's sgemm. */
static void run_product(const gemm_shape *s, product p, int own, operands *o)
{
    int N = s->rows, C = s->C, OC = s->OC;
    bf_mat none = {NULL, 0, 0};
    int declined = 0;
    switch (p) {
    case FORWARD:
        if (own)
            declined = bf_gemm(o->out, (size_t)OC,
                               (bf_mat){o->inp, (size_t)C, 1},
                               (bf_mat){o->w, (size_t)OC, 1}, none, NULL, N,
                               OC, C);
        else
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, OC, C,
                        1.0f, o->inp, C, o->w, OC, 0.0f, o->out, OC);
        break;
    case DINP:
        if (own)
            declined = bf_gemm(o->dinp, (size_t)C,
                               (bf_mat){o->dout, (size_t)OC, 1},
                               (bf_mat){o->w, 1, (size_t)OC}, none, NULL, N, C,
                               OC);
        else
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, C, OC,
                        1.0f, o->dout, OC, o->w, OC, 0.0f, o->dinp, C);
        break;
    default: /* DW, overwritten so both sides compute the same */
        if (own)
            declined = bf_gemm(o->dw, (size_t)OC,
                               (bf_mat){o->inp, 1, (size_t)C},
                               (bf_mat){o->dout, (size_t)OC, 1}, none, NULL,
                               C, OC, N);
        else
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, C, OC, N,
                        1.0f, o->inp, C, o->dout, OC, 0.0f, o->dw, OC);
    }
    if (declined) {
        fprintf(stderr, "bench_gemm: the gemm declined %s %dx%dx%d\n",
                PRODUCT_NAMES[p], N, C, OC);
        exit(1);
    }
}

static float *product_output(product p, operands *o, size_t *n,
                             const gemm_shape *s)
{
    if (p == FORWARD)
        return *n = (size_t)s->rows * s->OC, o->out;
    if (p == DINP)
        return *n = (size_t)s->rows * s->C, o->dinp;
    return *n = (size_t)s->C * s->OC, o->dw;
}

/* Seconds of the best of CALLS calls. */
static double time_product(const gemm_shape *s, product p, int own,
                           operands *o)
{
    double best = INFINITY;
    for (int c = 0; c < CALLS; c++) {
        double t0 = bf_now_seconds();
        run_product(s, p, own, o);
        double t = bf_now_seconds() - t0;
        best = t < best ? t : best;
    }
    return best;
}

/* The largest difference of own's output from OpenBLAS's, over sqrt(K) + 1
 * (sums of K terms of size ~1 in float). */
static double product_error(const gemm_shape *s, product p, operands *o)
{
    size_t n;
    run_product(s, p, 0, o);
    float *out = product_output(p, o, &n, s);
    float *ref = bf_xmalloc(n * sizeof *ref);
    for (size_t i = 0; i < n; i++)
        ref[i] = out[i];
    run_product(s, p, 1, o);
    double worst = 0.0;
    for (size_t i = 0; i < n; i++)
        worst = fmax(worst, fabs((double)out[i] - ref[i]));
    free(ref);
    int K = p == FORWARD ? s->C : p == DINP ? s->OC : s->rows;
    return worst / (sqrt((double)K) + 1.0);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *x, int n)
{
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 5;
    int rows = argc > 2 ? atoi(argv[2]) : 0; /* 0: each shape's own */
    if (rounds < 1 || rounds > MAX_ROUNDS || rows < 0 || argc > 3) {
        fprintf(stderr, "usage: %s [ROUNDS 1..%d [ROWS]]\n", argv[0],
                MAX_ROUNDS);
        return 2;
    }
    /* one BLAS thread, as the worker runs each rank (worker/main.c) and
     * as the own kernels run: OpenBLAS would otherwise take every core,
     * and the comparison would be of two cores against one */
    openblas_set_num_threads(1);
    bf_error err;
    if (bf_isa_use_env(&err) != 0) {
        fprintf(stderr, "bench_gemm: %s\n", err.msg);
        return 2;
    }
    printf("level %s, OpenBLAS core %s, 1 thread, %d rounds, GFLOP/s "
           "medians\n",
           bf_isa_name(bf_isa_current()), bf_isa_blas_core_in_use(), rounds);
    printf("%-6s %5s %5s %5s  %-8s %8s %8s %7s\n", "config", "rows", "C", "OC",
           "product", "own", "openblas", "ratio");
    bf_rng rng;
    bf_rng_seed(&rng, 7);
    int bad = 0;
    for (int si = 0; si < N_SHAPES; si++) {
        gemm_shape shape = SHAPES[si];
        if (rows > 0)
            shape.rows = rows;
        const gemm_shape *s = &shape;
        size_t N = (size_t)s->rows, C = (size_t)s->C, OC = (size_t)s->OC;
        operands o = {random_floats(&rng, N * C), random_floats(&rng, C * OC),
                      random_floats(&rng, N * OC), random_floats(&rng, N * OC),
                      random_floats(&rng, N * C), random_floats(&rng, C * OC)};
        double flops = 2.0 * (double)N * (double)C * (double)OC;
        for (int p = 0; p < N_PRODUCTS; p++) {
            double own[MAX_ROUNDS], blas[MAX_ROUNDS], ratio[MAX_ROUNDS];
            for (int r = 0; r < rounds; r++) {
                int first = r % 2; /* alternate which side runs first */
                double t[2];
                t[first] = time_product(s, (product)p, first, &o);
                t[!first] = time_product(s, (product)p, !first, &o);
                own[r] = flops / t[1] / 1e9;
                blas[r] = flops / t[0] / 1e9;
                ratio[r] = t[0] / t[1];
            }
            double error = product_error(s, (product)p, &o);
            bad |= !(error < 1e-5);
            printf("%-6s %5d %5d %5d  %-8s %8.1f %8.1f %6.3fx%s\n", s->config,
                   s->rows, s->C, s->OC, PRODUCT_NAMES[p], median(own, rounds),
                   median(blas, rounds), median(ratio, rounds),
                   error < 1e-5 ? "" : "  DIFFERS");
        }
        free(o.inp), free(o.w), free(o.out), free(o.dout), free(o.dinp),
            free(o.dw);
    }
    return bad;
}
