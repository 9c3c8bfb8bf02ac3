/* Training-step benchmark of the C model, side by side with PyTorch.
 *
 *   bench_train [--torch PATH/torch_ref.py] [--native PATH/bench_train]
 *               [--steps N]
 *
 * Measures the single-thread cblas_sgemm peak, then runs each config in a
 * fresh process (so peak RSS is that config's alone) once per dispatch level
 * this CPU runs (BIFOCAL_ISA, engine/isa.h; the first line is the level the
 * portable binary picks by itself), and with --native once more with the
 * bench_train of a -Dmarch=native build.  One step = zero_grad,
 * forward + backward over micro-batches of bf_model_micro_batch rows,
 * grad_norm, AdamW.  Prints tokens/s and time of the best step (the
 * least disturbed on a shared machine; PyTorch is timed the same way), peak
 * RSS and MFU (model
 * FLOPs/s over the sgemm peak), and with --torch the PyTorch tokens/s of
 * the same model and step and the ratio C/PyTorch.
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
} bench_config;

/* "study": the size the studies train (configs/study-*.yaml), where the
 * elementwise passes, not the matrix products, decide the speed. */
static const bench_config CONFIGS[] = {
    {"study", 64, 2, 4, 40, 32, BF_ROPE_SPECTRAL, 40},
    {"A", 128, 4, 4, 64, 32, BF_ROPE_BIFOCAL, 10},
    {"B", 256, 4, 4, 128, 16, BF_ROPE_BIFOCAL, 6},
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
                        .max_seq = bc->seq_len, .rope = bc->rope,
                        .rope_base = 10000.0,
                        .spectral_heads = bc->rope == BF_ROPE_SPECTRAL
                                              ? bc->n_heads
                                              : bc->n_heads / 2};
    return s;
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
    int mb = bf_model_micro_batch(&s, rows, T);
    bf_model m;
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
    printf("isa=%s micro_batch=%d step_ms=%.3f tokens_per_s=%.1f "
           "flops_per_s=%.6g rss_mib=%.1f params=%zu grad_norm=%.4g\n",
           bf_isa_name(bf_isa_current()), mb, dt * 1e3,
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

/* One run of config bc: `bin` (this program or a native build's) as a
 * child at dispatch level `isa` (NULL: the one it picks).  Returns its
 * tokens/s, its output line in line, or -1. */
static double run_level(const char *bin, const bench_config *bc, int steps,
                        const char *isa, char *line, size_t cap)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s%s '%s' --child %s %d",
             isa ? "BIFOCAL_ISA=" : "", isa ? isa : "", bin, bc->name, steps);
    return run_and_read(cmd, "tokens_per_s=", line, cap);
}

static void print_run(const char *label, const char *line, double tps,
                      double base_tps, double peak)
{
    double flops = field(line, "flops_per_s=");
    const char *isa = strstr(line, "isa=");
    printf("  %-16s %-8.*s %9.0f tokens/s  step %8.2f ms  peak RSS %6.1f MiB"
           "  MFU %5.1f%%  x%.2f\n", label, isa ? (int)strcspn(isa + 4, " ") : 1,
           isa ? isa + 4 : "?", tps, field(line, "step_ms="),
           field(line, "rss_mib="), 100.0 * flops / peak, tps / base_tps);
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
    const char *torch = NULL, *native = NULL;
    int scale = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--torch") && i + 1 < argc)
            torch = argv[++i];
        else if (!strcmp(argv[i], "--native") && i + 1 < argc)
            native = argv[++i];
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc)
            scale = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--torch torch_ref.py] "
                    "[--native native-build/bench/bench_train] [--steps N]\n",
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
    printf("sgemm peak, 1 thread, 1024^3: %.1f GFLOP/s (before the runs)\n",
           peak / 1e9);
    printf("ratios (x) are against the portable build's pick, measured in "
           "this run\n");
    for (int i = 0; i < N_CONFIGS; i++) {
        const bench_config *bc = &CONFIGS[i];
        int steps = bc->steps * (scale > 0 ? scale : 1);
        char line[1024];
        printf("config %s (d_model %d, %d layers, %d heads, seq %d, batch %d, "
               "%s, V %d)\n", bc->name, bc->d_model, bc->n_layers,
               bc->n_heads, bc->seq_len, bc->batch,
               bc->rope == BF_ROPE_SPECTRAL ? "spectral" : "bifocal",
               dyck_vocab());
        double pick = run_level(self, bc, steps, NULL, line, sizeof line);
        if (pick < 0) {
            fprintf(stderr, "bench_train: config %s failed\n", bc->name);
            return 1;
        }
        print_run("portable, picked", line, pick, pick, peak);
        for (int l = 0; l < BF_ISA_COUNT; l++) {
            if (!bf_isa_supported((bf_isa)l))
                continue;
            const char *name = bf_isa_name((bf_isa)l);
            double tps = run_level(self, bc, steps, name, line, sizeof line);
            if (tps > 0)
                print_run("portable, forced", line, tps, pick, peak);
        }
        if (native) {
            double tps = run_level(native, bc, steps, NULL, line,
                                   sizeof line);
            if (tps > 0)
                print_run("-Dmarch=native", line, tps, pick, peak);
            else
                printf("  -Dmarch=native   failed: %s\n", native);
        }
        if (!torch)
            continue;
        char cmd[2048], tline[1024];
        snprintf(cmd, sizeof cmd,
                 "OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 /usr/bin/python3 "
                 "'%s' --bench %d %d %d %d %d %d %d %s", torch, bc->d_model,
                 bc->n_layers, bc->n_heads, bc->seq_len, bc->batch,
                 dyck_vocab(), steps,
                 bc->rope == BF_ROPE_SPECTRAL ? "spectral" : "bifocal");
        double ttps = run_and_read(cmd, "torch_tokens_per_s ", tline,
                                   sizeof tline);
        if (ttps <= 0)
            printf("  PyTorch: not available\n");
        else
            printf("  PyTorch (1 thread)         %9.0f tokens/s  ->  "
                   "portable/PyTorch %.2fx\n", ttps, pick / ttps);
    }
    double peak_after = sgemm_peak_flops();
    printf("sgemm peak after the runs: %.1f GFLOP/s (MFU above is against "
           "the one before)\n", peak_after / 1e9);
    return 0;
}
