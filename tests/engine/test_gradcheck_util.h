/* Finite-difference gradient checking shared by the gradcheck tests.
 *
 * A check perturbs entries of one float buffer by +-eps, re-evaluates a
 * scalar loss (accumulated in double by the caller's function), and compares
 * the central differences with the analytic gradient over the sampled
 * entries as one vector: ||num - ana|| / max(||num||, ||ana||).  A missing
 * term, a wrong sign or a wrong index gives an error of order 1; float32
 * rounding gives 1e-6..1e-3 on well-scaled tensors. */
#ifndef TEST_GRADCHECK_UTIL_H
#define TEST_GRADCHECK_UTIL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "rng.h"

typedef double (*gc_loss_fn)(void *ctx);

/* Fills x[n] with N(0, std) from a seeded stream. */
static inline void gc_fill_normal(float *x, size_t n, double std,
                                  uint64_t seed)
{
    bf_rng r;
    bf_rng_seed(&r, bf_rng_key(seed, 0x6763));
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(std * bf_rng_normal(&r));
}

/* Relative error over at most max_checks entries of x (spread evenly, so
 * every part of a tensor is visited).  Restores x.  Prints the figure with
 * `what` so a failing run says which gradient broke. */
static inline double gc_rel_error(const char *what, gc_loss_fn loss,
                                  void *ctx, float *x, const float *analytic,
                                  size_t n, size_t max_checks, float eps)
{
    size_t stride = n > max_checks ? n / max_checks : 1;
    double diff2 = 0.0, num2 = 0.0, ana2 = 0.0;
    for (size_t i = 0; i < n; i += stride) {
        float saved = x[i];
        x[i] = saved + eps;
        double up = loss(ctx);
        x[i] = saved - eps;
        double down = loss(ctx);
        x[i] = saved;
        /* the perturbation actually applied, after float rounding */
        double h = ((double)(saved + eps) - (double)(saved - eps));
        double num = (up - down) / h;
        double d = num - analytic[i];
        diff2 += d * d;
        num2 += num * num;
        ana2 += (double)analytic[i] * analytic[i];
    }
    double scale = sqrt(fmax(num2, ana2));
    double err = scale > 0.0 ? sqrt(diff2) / scale : 0.0;
    printf("# gradcheck %-28s rel err %.2e (|grad| %.2e)\n", what, err,
           sqrt(ana2));
    return err;
}

#endif
