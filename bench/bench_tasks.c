/* What the code task costs beside the formal tasks.
 *
 *   bench_tasks [--code-dir DIR]    (default: the job default, the Python
 *                                    standard library)
 *
 * Prints, in one run: the time to read the corpus and what it occupies;
 * the time to make one training example (depths 1..4, rows of 48 tokens)
 * of each task, best of 5 runs of 20,000; and one optimizer step of the
 * study's model size (d_model 64, 2 layers, 4 heads, batch 32, spectral),
 * best of 30, beside the time its batch of examples takes for dyck and for
 * code: the share of a step that cutting snippets out of real files costs.
 * (Two steps timed on a shared machine differ by more than that share, so
 * the share is measured, not a difference of two steps.) */
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "code_corpus.h"
#include "tasks.h"
#include "train.h"

enum { T = 48, EXAMPLES = 20000, RUNS = 5, STEPS = 30 };

static bf_job_config config_of(bf_task_kind task, const char *code_dir)
{
    bf_job_config cfg;
    bf_job_config_defaults(&cfg);
    cfg.task = task;
    snprintf(cfg.code_dir, sizeof cfg.code_dir, "%s", code_dir);
    cfg.depth = 4;
    cfg.eval_depths[0] = 4;
    cfg.n_eval_depths = 1;
    cfg.seq_len = T;
    cfg.rope = BF_ROPE_SPECTRAL;
    cfg.steps = 1000;
    bf_error err;
    if (bf_job_config_validate(&cfg, &err) != 0) {
        fprintf(stderr, "bench_tasks: %s\n", err.msg);
        exit(1);
    }
    return cfg;
}

/* Best microseconds per training example over RUNS runs. */
static double example_us(const bf_job_config *cfg)
{
    static int inputs[T], targets[T];
    double best = 1e30;
    for (int run = 0; run < RUNS; run++) {
        double t0 = bf_now_seconds();
        for (int i = 0; i < EXAMPLES; i++)
            bf_task_train_example(cfg, (uint64_t)(run * EXAMPLES + i), inputs,
                                  targets, T);
        double us = (bf_now_seconds() - t0) * 1e6 / EXAMPLES;
        best = us < best ? us : best;
    }
    return best;
}

/* Best milliseconds of one optimizer step over STEPS steps. */
static double step_ms(const bf_job_config *cfg)
{
    bf_trainer_opts opts = {.rank = 0, .nranks = 1};
    bf_trainer *t;
    bf_error err;
    if (bf_trainer_create(&t, cfg, &opts, &err) != 0) {
        fprintf(stderr, "bench_tasks: %s\n", err.msg);
        exit(1);
    }
    double best = 1e30;
    for (int s = 0; s < STEPS; s++) {
        double t0 = bf_now_seconds();
        bf_trainer_step(t, NULL, NULL, NULL);
        double ms = (bf_now_seconds() - t0) * 1e3;
        best = ms < best ? ms : best;
    }
    bf_trainer_free(t);
    return best;
}

int main(int argc, char **argv)
{
    const char *code_dir = BF_CODE_DIR_DEFAULT;
    if (argc == 3 && strcmp(argv[1], "--code-dir") == 0)
        code_dir = argv[2];
    else if (argc != 1) {
        fprintf(stderr, "usage: bench_tasks [--code-dir DIR]\n");
        return 2;
    }
    bf_error err;
    double t0 = bf_now_seconds();
    const bf_code_corpus *corpus = bf_code_corpus_get(code_dir, &err);
    double load = bf_now_seconds() - t0;
    if (!corpus) {
        fprintf(stderr, "bench_tasks: %s\n", err.msg);
        return 1;
    }
    bf_code_stats st;
    bf_code_corpus_stats(corpus, &st);
    bf_code_corpus_put(corpus);
    printf("corpus %s: read in %.2f s, %d files, %.1f MiB in memory\n",
           code_dir, load, st.files[BF_CODE_TRAIN] + st.files[BF_CODE_EVAL],
           st.memory_bytes / 1048576.0);

    static const bf_task_kind tasks[] = {BF_TASK_DYCK, BF_TASK_COUNTER,
                                         BF_TASK_MODARITH, BF_TASK_CODE};
    printf("one training example (depths 1..4, %d tokens), best of %d x %d:\n",
           T, RUNS, EXAMPLES);
    double us[sizeof tasks / sizeof *tasks];
    for (size_t i = 0; i < sizeof tasks / sizeof *tasks; i++) {
        bf_job_config cfg = config_of(tasks[i], code_dir);
        us[i] = example_us(&cfg);
        printf("  %-9s %7.2f us\n", bf_task_name(tasks[i]), us[i]);
    }

    bf_job_config cfg = config_of(BF_TASK_CODE, code_dir);
    double ms = step_ms(&cfg);
    double dyck_batch = us[0] * cfg.batch_size / 1e3;
    double code_batch = us[3] * cfg.batch_size / 1e3;
    printf("one step of code (d_model %d, %d layers, %d heads, batch %d, "
           "seq_len %d), best of %d: %.2f ms; its batch of examples: dyck "
           "%.3f ms (%.2f%%), code %.3f ms (%.2f%%)\n", cfg.d_model,
           cfg.n_layers, cfg.n_heads, cfg.batch_size, T, STEPS, ms,
           dyck_batch, 100 * dyck_batch / ms, code_batch,
           100 * code_batch / ms);
    return 0;
}
