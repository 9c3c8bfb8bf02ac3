#include "data.h"

#include <stdlib.h>

#include "alloc.h"
#include "tasks.h"
#include "train.h"
#include "vocab.h"

static void print_ints(FILE *out, const char *key, const int *v, int n)
{
    fprintf(out, ",\"%s\":[", key);
    for (int i = 0; i < n; i++)
        fprintf(out, i ? ",%d" : "%d", v[i]);
    fputc(']', out);
}

static void print_train(FILE *out, const bf_job_config *cfg, long from_step,
                        long to_step, int *in, int *tg, int *pos)
{
    int T = cfg->seq_len;
    for (long s = from_step; s < to_step; s++)
        for (int r = 0; r < cfg->batch_size; r++) {
            uint64_t index = bf_task_step_first(cfg, s) + (uint64_t)r;
            bf_task_train_example(cfg, index, in, tg, T);
            bf_task_train_positions(cfg, index, pos, T);
            fprintf(out, "{\"split\":\"train\",\"step\":%ld,\"row\":%d,"
                    "\"index\":%llu", s, r, (unsigned long long)index);
            print_ints(out, "input", in, T);
            print_ints(out, "target", tg, T);
            print_ints(out, "positions", pos, T);
            fputs("}\n", out);
        }
}

static void print_eval(FILE *out, const bf_job_config *cfg, int *in, int *tg)
{
    int T = cfg->seq_len;
    for (int k = 0; k < cfg->n_eval_depths; k++)
        for (int i = 0; i < cfg->eval_examples; i++) {
            int depth = cfg->eval_depths[k];
            bf_task_eval_example(cfg, depth, (uint64_t)i, in, tg, T);
            fprintf(out, "{\"split\":\"eval\",\"depth\":%d,\"index\":%d",
                    depth, i);
            print_ints(out, "input", in, T);
            print_ints(out, "target", tg, T);
            fputs("}\n", out);
        }
}

static void print_model(FILE *out, const bf_job_config *cfg)
{
    json_t *line = json_pack(
        "{s:s, s:o, s:i, s:i, s:i, s:{s:f, s:f, s:f, s:f}}", "split", "model",
        "config", bf_job_config_to_json(cfg), "vocab_size", bf_vocab_size(cfg),
        "spectral_heads", bf_job_config_spectral_heads(cfg), "prope_pairs",
        bf_job_config_prope_pairs(cfg), "optimizer",
        "beta1", (double)BF_ADAM_BETA1, "beta2", (double)BF_ADAM_BETA2,
        "eps", (double)BF_ADAM_EPS, "min_lr_fraction", BF_MIN_LR_FRACTION);
    json_dumpf(line, out, JSON_COMPACT | JSON_SORT_KEYS
                          | JSON_REAL_PRECISION(17));
    fputc('\n', out);
    json_decref(line);
}

int bf_data_print(FILE *out, const bf_job_config *cfg, long from_step,
                  long to_step, int what)
{
    size_t T = (size_t)cfg->seq_len;
    int *in = bf_xmalloc(3 * T * sizeof *in), *tg = in + T, *pos = tg + T;
    if (what & BF_DATA_MODEL)
        print_model(out, cfg);
    if (what & BF_DATA_TRAIN)
        print_train(out, cfg, from_step, to_step, in, tg, pos);
    if (what & BF_DATA_EVAL)
        print_eval(out, cfg, in, tg);
    free(in);
    return fflush(out) == 0 && !ferror(out) ? 0 : -1;
}
