/* Training-step benchmark of the C model, side by side with PyTorch.
 *
 *   bench_train [--torch PATH/torch_ref.py] [--steps N]
 *
 * Measures the single-thread cblas_sgemm peak, then runs each config in a
 * fresh process (so peak RSS is that config's alone): one step = zero_grad,
 * forward + backward over micro-batches of bf_model_micro_batch rows,
 * grad_norm, AdamW.  Prints tokens/s and time of the best step (the
 * least disturbed on a shared machine; PyTorch is timed the same way), peak
 * RSS and MFU (model
 * FLOPs/s over the sgemm peak), and with --torch the PyTorch tokens/s of
 * the same model and step and the ratio C/PyTorch.
 *
 *   bench_train --child NAME STEPS   (internal: one config, one process) */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "alloc.h"
#include "clock.h"
#include "model.h"
#include "rng.h"
#include "tasks.h"

typedef struct bench_config {
    const char *name;
    int d_model, n_layers, n_heads, seq_len, batch;
    int steps; /* timed steps at --steps 1 scale */
} bench_config;

static const bench_config CONFIGS[] = {
    {"A", 128, 4, 4, 64, 32, 10},
    {"B", 256, 4, 4, 128, 16, 6},
};
enum { N_CONFIGS = sizeof CONFIGS / sizeof CONFIGS[0] };

/* Best of 20 1024^3 sgemms: what one core can do at best (on a shared
 * machine the best run is the one least disturbed). */
static double sgemm_peak_flops(void)
{
    enum { S = 1024 };
    float *a = bf_xmalloc(sizeof(float) * S * S), *b = bf_xmalloc(sizeof(float) * S * S);
    float *c = bf_xmalloc(sizeof(float) * S * S);
    for (size_t i = 0; i < (size_t)S * S; i++) {
        a[i] = (float)(i % 13) * 0.01f;
        b[i] = (float)(i % 7) * 0.01f;
    }
    double best = 1e30;
    for (int rep = 0; rep < 20; rep++) {
        double t0 = bf_now_seconds();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, S, S, S, 1.0f,
                    a, S, b, S, 0.0f, c, S);
        double dt = bf_now_seconds() - t0;
        if (dt < best)
            best = dt;
    }
    free(a);
    free(b);
    free(c);
    return 2.0 * S * S * S / best;
}

/* The dyck task's vocabulary with default settings. */
static int dyck_vocab(void)
{
    bf_job_config cfg;
    bf_job_config_defaults(&cfg);
    cfg.task = BF_TASK_DYCK;
    return bf_task_vocab_size(&cfg);
}

static bf_model_shape shape_of(const bench_config *bc)
{
    bf_model_shape s = {.vocab = dyck_vocab(), .d_model = bc->d_model,
                        .n_layers = bc->n_layers, .n_heads = bc->n_heads,
                        .max_seq = bc->seq_len, .rope = BF_ROPE_BIFOCAL,
                        .rope_base = 10000.0,
                        .spectral_heads = bc->n_heads / 2};
    return s;
}

/* One config in this process; prints key=value figures for the parent. */
static int run_child(const bench_config *bc, int steps)
{
    bf_model_shape s = shape_of(bc);
    int T = bc->seq_len, rows = bc->batch;
    int mb = bf_model_micro_batch(&s, rows, T);
    bf_model m;
    bf_error err;
    if (bf_model_create(&m, &s, mb, T, &err) < 0) {
        fprintf(stderr, "bench_train: %s\n", err.msg);
        return 1;
    }
    bf_model_init_weights(&m, 1);
    int *in = bf_xmalloc(sizeof(int) * rows * T), *tg = bf_xmalloc(sizeof(int) * rows * T);
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
    double norm_sum = 0, dt = 1e30;
    const int warmup = 2;
    for (int step = 1; step <= warmup + steps; step++) {
        double t0 = bf_now_seconds();
        bf_model_zero_grad(&m);
        for (int row = 0; row < rows; row += mb) {
            int b = rows - row < mb ? rows - row : mb, n;
            bf_model_forward(&m, in + row * T, tg + row * T, NULL, b, T, &n);
            bf_model_backward(&m, 1.0f / (float)(rows * T));
        }
        norm_sum += bf_model_grad_norm(&m); /* the trainer clips with it */
        bf_adamw_step(&m, &hp, step, 1.0f);
        if (step > warmup && bf_now_seconds() - t0 < dt)
            dt = bf_now_seconds() - t0;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double tokens = (double)rows * T;
    printf("micro_batch=%d step_ms=%.3f tokens_per_s=%.1f flops_per_s=%.6g "
           "rss_mib=%.1f params=%zu grad_norm=%.4g\n", mb, dt * 1e3,
           tokens / dt, bf_model_train_flops(&s, T, tokens) / dt,
           ru.ru_maxrss / 1024.0, m.num_params, norm_sum / (warmup + steps));
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

int main(int argc, char **argv)
{
    openblas_set_num_threads(1);
    if (argc == 4 && !strcmp(argv[1], "--child")) {
        for (int i = 0; i < N_CONFIGS; i++)
            if (!strcmp(argv[2], CONFIGS[i].name))
                return run_child(&CONFIGS[i], atoi(argv[3]));
        return 2;
    }
    const char *torch = NULL;
    int scale = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--torch") && i + 1 < argc)
            torch = argv[++i];
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc)
            scale = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--torch torch_ref.py] [--steps N]\n",
                    argv[0]);
            return 2;
        }
    }
    char self[1024];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n < 0)
        return 1;
    self[n] = '\0';

    /* the peak before and after the runs: the better of the two */
    double peak = sgemm_peak_flops();
    char lines[N_CONFIGS][1024];
    double tps[N_CONFIGS], torch_tps[N_CONFIGS];
    for (int i = 0; i < N_CONFIGS; i++) {
        const bench_config *bc = &CONFIGS[i];
        int steps = bc->steps * (scale > 0 ? scale : 1);
        char cmd[2048], tline[1024];
        snprintf(cmd, sizeof cmd, "'%s' --child %s %d", self, bc->name, steps);
        tps[i] = run_and_read(cmd, "tokens_per_s=", lines[i], sizeof lines[i]);
        if (tps[i] < 0) {
            fprintf(stderr, "bench_train: config %s failed\n", bc->name);
            return 1;
        }
        torch_tps[i] = -1;
        if (!torch)
            continue;
        snprintf(cmd, sizeof cmd,
                 "OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 /usr/bin/python3 "
                 "'%s' --bench %d %d %d %d %d %d %d", torch, bc->d_model,
                 bc->n_layers, bc->n_heads, bc->seq_len, bc->batch,
                 dyck_vocab(), steps);
        torch_tps[i] = run_and_read(cmd, "torch_tokens_per_s ", tline,
                                    sizeof tline);
    }
    double peak_after = sgemm_peak_flops();
    if (peak_after > peak)
        peak = peak_after;

    printf("sgemm peak, 1 thread, 1024^3: %.1f GFLOP/s\n", peak / 1e9);
    for (int i = 0; i < N_CONFIGS; i++) {
        const bench_config *bc = &CONFIGS[i];
        const char *line = lines[i];
        double flops = field(line, "flops_per_s=");
        printf("config %s (d_model %d, %d layers, %d heads, seq %d, batch %d, "
               "bifocal, V %d): micro-batch %d, %zu params\n", bc->name,
               bc->d_model, bc->n_layers, bc->n_heads, bc->seq_len, bc->batch,
               dyck_vocab(), (int)field(line, "micro_batch="),
               (size_t)field(line, "params="));
        printf("  C:       %9.0f tokens/s  step %8.2f ms  peak RSS %6.1f MiB  "
               "%.1f GFLOP/s  MFU %.1f%%\n", tps[i], field(line, "step_ms="),
               field(line, "rss_mib="), flops / 1e9, 100.0 * flops / peak);
        if (!torch)
            continue;
        if (torch_tps[i] <= 0)
            printf("  PyTorch: not available\n");
        else
            printf("  PyTorch: %9.0f tokens/s  ->  C/PyTorch %.2fx\n",
                   torch_tps[i], tps[i] / torch_tps[i]);
    }
    return 0;
}
