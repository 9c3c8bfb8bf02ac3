/* The attention layer alone, forward + backward, on both paths: the fused
 * small-head kernel and the sgemm one, on the heads of the study, config A
 * and config B (the fused tiles' limits, layers.h: BF_ATT_FUSED_MAX_T,
 * BF_ATT_FUSED_MAX_HD) and just past each limit (sgemm only), so the rule
 * (isa.h, bf_isa_attention_fused) can be read off: for each (T, head_dim)
 * and path the best time of a forward + backward over batch 32 x 4 heads,
 * the rate in causal multiply-adds per second (T (T+1) / 2 * head_dim per
 * product, 2 products forward and 4 backward), and the path the rule
 * takes with the OpenBLAS kernels in use.  Every (shape, path) is timed
 * once a round for ROUNDS rounds (default 5), alternating, and the best
 * run counts.  Each shape within the limits ends with the check that the
 * rule's path is the faster one or within RULE_SLACK of it; a miss names
 * the level whose figures the rule lacks (the rule once took a fused copy
 * 2.3x slower than sgemm at every AVX2-only CPU, measured only at
 * avx512).  scripts/bench.sh runs it at every level.
 *
 *   bench_attention [ROUNDS]     (at the level BIFOCAL_ISA names or the
 *                                 best, with the OpenBLAS kernels it pins
 *                                 or OPENBLAS_CORETYPE names) */
#include <stdio.h>
#include <stdlib.h>

#include <cblas.h>

#include "alloc.h"
#include "clock.h"
#include "isa.h"
#include "layers.h"
#include "rng.h"

typedef struct att_shape {
    int T, hd;
} att_shape;

/* the study's heads, config A's, config B's (the limits), then just past
 * each limit */
static const att_shape SHAPES[] = {
    {40, 16}, {64, 32}, {128, 64}, {136, 64}, {128, 72},
};
enum { N_SHAPES = sizeof SHAPES / sizeof SHAPES[0], B = 32, NH = 4 };

/* The rule's path may be this much slower than the other before the run
 * says the rule is wrong for this level and core: two paths within 10%
 * are a tie on this shared machine. */
#define RULE_SLACK 1.10

static int within_limits(const att_shape *sh)
{
    return BF_ATT_FUSED_FITS(sh->T, sh->hd);
}

/* Seconds of the best of `reps` forward + backward passes of shape sh on
 * the fused path or the sgemm one, the buffers allocated as the model's
 * activations are (bf_xcalloc_arena). */
static double time_shape(const att_shape *sh, int fused, int reps)
{
    int T = sh->T, C = sh->hd * NH;
    size_t n_qkv = (size_t)B * T * 3 * C, n_out = (size_t)B * T * C;
    float *qkv = bf_xcalloc_arena(n_qkv * sizeof *qkv);
    float *dqkv = bf_xcalloc_arena(n_qkv * sizeof *dqkv);
    float *out = bf_xcalloc_arena(n_out * sizeof *out);
    float *dout = bf_xcalloc_arena(n_out * sizeof *dout);
    float *att = bf_xcalloc_arena((size_t)B * NH * T * T * sizeof *att);
    float *scratch = bf_xcalloc_arena((size_t)T * T * sizeof *scratch);
    bf_rng r;
    bf_rng_seed(&r, 1);
    for (size_t i = 0; i < n_qkv; i++)
        qkv[i] = (float)bf_rng_normal(&r);
    for (size_t i = 0; i < n_out; i++)
        dout[i] = (float)bf_rng_normal(&r);
    double best = 1e30;
    for (int rep = 0; rep < reps; rep++) {
        double t0 = bf_now_seconds();
        bf_attention_forward(out, att, qkv, B, T, C, NH, fused);
        bf_attention_backward(dqkv, scratch, dout, qkv, att, B, T, C, NH,
                              fused);
        double dt = bf_now_seconds() - t0;
        best = dt < best ? dt : best;
    }
    free(qkv);
    free(dqkv);
    free(out);
    free(dout);
    free(att);
    free(scratch);
    return best;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 5;
    if (rounds < 1) {
        fprintf(stderr, "usage: bench_attention [ROUNDS >= 1]\n");
        return 2;
    }
    /* one BLAS thread, as the worker runs each rank (worker/main.c) and
     * as the own kernels run: OpenBLAS would otherwise take every core,
     * and the comparison would be of two cores against one */
    openblas_set_num_threads(1);
    bf_error err;
    if (bf_isa_use_env(&err) != 0) {
        fprintf(stderr, "bench_attention: %s\n", err.msg);
        return 2;
    }
    double best[N_SHAPES][2]; /* [shape][fused] */
    int missed = 0;
    for (int i = 0; i < N_SHAPES; i++)
        best[i][0] = best[i][1] = 1e30;
    for (int round = 0; round < rounds; round++)
        for (int i = 0; i < N_SHAPES; i++)
            for (int fused = 0; fused <= within_limits(&SHAPES[i]); fused++) {
                double dt = time_shape(&SHAPES[i], fused, 10);
                best[i][fused] = dt < best[i][fused] ? dt : best[i][fused];
            }
    printf("attention forward + backward, batch %d x %d heads, level %s, "
           "OpenBLAS %s, 1 thread, best of %d rounds x 10 (fused tiles up to "
           "T %d, head_dim %d)\n", B, NH, bf_isa_name(bf_isa_current()),
           bf_isa_blas_core_in_use(), rounds, BF_ATT_FUSED_MAX_T,
           BF_ATT_FUSED_MAX_HD);
    for (int i = 0; i < N_SHAPES; i++) {
        const att_shape *sh = &SHAPES[i];
        double macs = 6.0 * B * NH * sh->T * (sh->T + 1) / 2.0 * sh->hd;
        int rule = bf_isa_attention_fused(sh->T, sh->hd);
        for (int fused = within_limits(sh); fused >= 0; fused--)
            printf("  T %3d  head_dim %2d  %-6s %8.3f ms  %6.2f G "
                   "multiply-adds/s%s\n", sh->T, sh->hd,
                   fused ? "fused" : "sgemm", best[i][fused] * 1e3,
                   macs / best[i][fused] / 1e9,
                   rule == fused ? "  (the rule's path)" : "");
        if (!within_limits(sh))
            continue;
        double other = best[i][!rule] / best[i][rule];
        int holds = other >= 1.0 / RULE_SLACK;
        missed += !holds;
        printf("  T %3d  head_dim %2d  sgemm / fused time %.2fx; the rule's "
               "path against the other %.2fx (>= %.2fx): %s\n", sh->T, sh->hd,
               best[i][0] / best[i][1], other, 1.0 / RULE_SLACK,
               holds ? "holds" : "MISSES");
    }
    if (missed)
        printf("the rule took the slower path by more than %.0f%% at %d "
               "shape%s: engine/isa.c's table needs this level's figures\n",
               (RULE_SLACK - 1.0) * 100.0, missed, missed > 1 ? "s" : "");
    return 0;
}
