/* The attention layer alone, forward + backward, on shapes either side of
 * the fused small-head path's limits (layers.h: BF_ATT_FUSED_MAX_T,
 * BF_ATT_FUSED_MAX_HD), so the rule can be read off: for each (T, head_dim)
 * the path the rule picks, the best time of a forward + backward over
 * batch 32 x 4 heads, and the rate in causal multiply-adds per second
 * (T (T+1) / 2 * head_dim per product, 2 products forward and 4 backward).
 * A shape just inside a limit beside one just outside it compares the two
 * paths on nearly the same work.  Every shape is timed once a round for
 * ROUNDS rounds (default 5), alternating, and the best run counts.
 *
 *   bench_attention [ROUNDS]     (at the level BIFOCAL_ISA names or the best)
 *
 * Before and after: built against a tree without the fused path (main at
 * b19cefc, release build in OLD), every shape runs the sgemm path:
 *   gcc -O2 -IOLD/engine -IOLD/common -I/usr/include/x86_64-linux-gnu/openblas-pthread
 *       bench/bench_attention.c -o bench_attention_old -Wl,--whole-archive
 *       OLD/build/engine/libbifocal_kernels_*.a -Wl,--no-whole-archive
 *       OLD/build/engine/libbifocal_model.a OLD/build/common/libbifocal_common.a
 *       -lopenblas -ljansson -lm */
#include <stdio.h>
#include <stdlib.h>

#include "alloc.h"
#include "clock.h"
#include "isa.h"
#include "layers.h"
#include "rng.h"

#ifndef BF_ATT_FUSED_MAX_T /* a tree from before the fused path */
#define BF_ATT_FUSED_MAX_T 0
#define BF_ATT_FUSED_MAX_HD 0
#endif

typedef struct att_shape {
    int T, hd;
} att_shape;

/* the study's heads, config A's, config B's (the limits), then just past
 * each limit */
static const att_shape SHAPES[] = {
    {40, 16}, {64, 32}, {128, 64}, {136, 64}, {128, 72},
};
enum { N_SHAPES = sizeof SHAPES / sizeof SHAPES[0], B = 32, NH = 4 };

/* Seconds of the best of `reps` forward + backward passes of shape sh. */
static double time_shape(const att_shape *sh, int reps)
{
    int T = sh->T, C = sh->hd * NH;
    size_t n_qkv = (size_t)B * T * 3 * C, n_out = (size_t)B * T * C;
    float *qkv = bf_xmalloc(n_qkv * sizeof *qkv);
    float *dqkv = bf_xmalloc(n_qkv * sizeof *dqkv);
    float *out = bf_xmalloc(n_out * sizeof *out);
    float *dout = bf_xmalloc(n_out * sizeof *dout);
    float *att = bf_xmalloc((size_t)B * NH * T * T * sizeof *att);
    float *scratch = bf_xmalloc((size_t)T * T * sizeof *scratch);
    bf_rng r;
    bf_rng_seed(&r, 1);
    for (size_t i = 0; i < n_qkv; i++)
        qkv[i] = (float)bf_rng_normal(&r);
    for (size_t i = 0; i < n_out; i++)
        dout[i] = (float)bf_rng_normal(&r);
    double best = 1e30;
    for (int rep = 0; rep < reps; rep++) {
        double t0 = bf_now_seconds();
        bf_attention_forward(out, att, qkv, B, T, C, NH);
        bf_attention_backward(dqkv, scratch, dout, qkv, att, B, T, C, NH);
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
    bf_error err;
    if (bf_isa_use_env(&err) != 0) {
        fprintf(stderr, "bench_attention: %s\n", err.msg);
        return 2;
    }
    double best[N_SHAPES];
    for (int i = 0; i < N_SHAPES; i++)
        best[i] = 1e30;
    for (int round = 0; round < rounds; round++)
        for (int i = 0; i < N_SHAPES; i++) {
            double dt = time_shape(&SHAPES[i], 10);
            best[i] = dt < best[i] ? dt : best[i];
        }
    printf("attention forward + backward, batch %d x %d heads, level %s, "
           "best of %d rounds x 10 (fused when T <= %d and head_dim <= %d)\n",
           B, NH, bf_isa_name(bf_isa_current()), rounds, BF_ATT_FUSED_MAX_T,
           BF_ATT_FUSED_MAX_HD);
    for (int i = 0; i < N_SHAPES; i++) {
        const att_shape *sh = &SHAPES[i];
        int fused = sh->T <= BF_ATT_FUSED_MAX_T && sh->hd <= BF_ATT_FUSED_MAX_HD;
        double macs = 6.0 * B * NH * sh->T * (sh->T + 1) / 2.0 * sh->hd;
        printf("  T %3d  head_dim %2d  %-6s %8.3f ms  %6.2f G multiply-adds/s\n",
               sh->T, sh->hd, fused ? "fused" : "sgemm", best[i] * 1e3,
               macs / best[i] / 1e9);
    }
    return 0;
}
